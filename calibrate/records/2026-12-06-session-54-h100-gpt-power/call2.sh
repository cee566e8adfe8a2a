#!/usr/bin/env bash
# Session 54, call 2: GPT-style element-wise kernels swept alone on an H100 at all seven shapes the
# H200 sweep used (session 53's record, call 1: 2,048-8,192 tokens, hidden 768-2,560), the three
# larger-hidden ones call 1 of this record left out among them, and the Llama-style kernels of GPT
# 125M's micro-batch 4 beside them. Builds only calibrate; four files under $OUT, each sweep's
# lines written as it goes.
set -u
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DTRAINSIM_BENCHMARKS=OFF > /tmp/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target calibrate > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log >> $OUT/which.txt; exit 1; }
echo "built $(date +%T)" >> $OUT/which.txt
q=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap
nvidia-smi -i 0 --query-gpu=$q --format=csv >/dev/null 2>&1 || q=timestamp,clocks.sm,power.draw
nvidia-smi -i 0 --query-gpu=$q --format=csv -lms 100 > $OUT/clocks.csv 2>&1 &
smi=$!
sleep 3
km() { ./build-gpu/calibrate kernel-mix --clock-log $OUT/clocks.csv "$@" >> $OUT/kernel-mix.txt 2>&1; echo "[$(date +%T)] kernel-mix $* exit $?" >> $OUT/which.txt; }
for l in 8192,768,3072 4096,768,3072 2048,768,3072 8192,1024,4096 8192,1536,6144 8192,2048,8192 2048,2560,10240; do
  km --layer-kind gpt --layer $l --shares 0
done
km --layer 8192,768,3072 --shares 0
kill $smi
python3 calibrate/records/2026-12-06-session-51-power-by-kind/by_kind.py 1980 $OUT/kernel-mix.txt > $OUT/by-kind.txt 2>&1

#!/usr/bin/env bash
# Session 53, the H100 call: GPT's own element-wise kernels swept alone on an H100 at the small GPT
# validation steps' shapes, with the Llama-style kernels of GPT 125M's micro-batch 4 beside them on
# the same card, to set against what session 52's call 3 read inside those steps on an H100
# (the rest of the step: 335-441 W). Builds only calibrate; keeps four files under $OUT (the device
# tool returns a limited number) and writes each sweep's lines as it goes, so that a call cut
# short still returns what it measured.
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
# GPT 125M at micro-batches 4, 2, 1 and 8 (8192 tokens is mb4 at 2048; mb8 is 16384), GPT 350M at 4.
for l in 8192,768,3072 4096,768,3072 2048,768,3072 8192,1024,4096 2048,1024,4096; do
  km --layer-kind gpt --layer $l --shares 0
done
km --layer 8192,768,3072 --shares 0
kill $smi
python3 calibrate/records/2026-12-06-session-51-power-by-kind/by_kind.py 1980 $OUT/kernel-mix.txt > $OUT/by-kind.txt 2>&1

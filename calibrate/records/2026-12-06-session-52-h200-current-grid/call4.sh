#!/usr/bin/env bash
# Session 52, device call 4 (prepared, not yet run: the session's device time was spent): GPT's
# own element-wise kernels swept alone, at the GPT validation steps' shapes, to set against what
# calls 2-3 read inside those steps (335-441 W for the rest of the small GPT steps) and against
# Llama-style kernels of the same shapes (session 51's record, call 1: 466-547 W). Then a GEMM of
# GPT 125M's beside its GPT-style kernels, and the GPU tests (GpuKernels.KernelMixRunsTheSharesAskedFor
# runs the GPT kind). Everything under $OUT is tarred at the end (the device tool returns a
# limited number of files). Either part; about four minutes.
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$gpu" > $OUT/which.txt
pack() { cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz .; }
OUT=$OUT/s bash tools/gpu_session.sh || { pack; exit 1; }   # build only
mkdir -p $OUT/t
q=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap
nvidia-smi -i 0 --query-gpu=$q --format=csv >/dev/null 2>&1 || q=timestamp,clocks.sm,power.draw
nvidia-smi -i 0 --query-gpu=$q --format=csv -lms 100 > $OUT/t/clocks.csv 2>&1 &
smi=$!
phase() { echo "[$(date +%T)] $* ($SECONDS s)" >> $OUT/t/phases.txt; }
km() { ./build-gpu/calibrate kernel-mix --clock-log $OUT/t/clocks.csv "$@" 2>&1 | tee -a $OUT/t/kernel-mix.txt; phase "kernel-mix $* exit ${PIPESTATUS[0]}"; }
sleep 3
# GPT 125M at micro-batches 4, 2 and 1; GPT 350M at 4; GPT 760M and 1.3B at 4; GPT 2.7B at 1.
for l in 8192,768,3072 4096,768,3072 2048,768,3072 8192,1024,4096 8192,1536,6144 8192,2048,8192 2048,2560,10240; do
  km --layer-kind gpt --layer $l --shares 0
done
# The Llama-style kernels at GPT 125M's micro-batch 4 again, on this card, for the pair.
km --layer 8192,768,3072 --shares 0
# GPT 125M's MLP up projection at micro-batch 4 beside its own GPT-style kernels.
km --layer-kind gpt --layer 8192,768,3072 --gemm 8192,3072,768 --shares 0.5
kill $smi
OUT=$OUT/s bash tools/gpu_session.sh gpu-tests
phase "gpu tests"
cat $OUT/t/phases.txt
python3 calibrate/records/2026-12-06-session-51-power-by-kind/by_kind.py 1980 $OUT/t/kernel-mix.txt | tee $OUT/t/by-kind.txt
pack

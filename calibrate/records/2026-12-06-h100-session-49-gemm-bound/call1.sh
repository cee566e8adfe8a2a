#!/usr/bin/env bash
# Session 49, device call 1. On an H200: calibrate h200-sxm with the current GEMM grid, then the
# GEMM-bound step and the Llama one-GPU runs with their kernels timed in the step. On an H100: the
# last two only (nothing to calibrate that session 48 has not).
set -u
export NCCL_NVLS_ENABLE=0
R=calibrate/records/2026-12-06-h100-session-49-gemm-bound
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
hw=h100-sxm; case "$gpu" in *H200*) hw=h200-sxm ;; esac
echo "$gpu -> $hw" > $OUT/which.txt
steps=""
[ "$hw" = h200-sxm ] && steps=calibrate
OUT=$OUT/s bash tools/gpu_session.sh $steps
mkdir -p $OUT/kc
nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100 > $OUT/kc/clocks.csv 2>&1 &
smi=$!
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date '+%Y/%m/%d %H:%M:%S.%3N')" "$l"; done; }
TRAINSIM_TIME_KERNEL_CLASSES=1 ./build-gpu/planner validate $R/call1-validate-gemm-heavy.json --hardware $hw --json-out $OUT/kc/gemm-heavy-kc.json 2>&1 | stamp > $OUT/kc/gemm-heavy-kc.log
./build-gpu/planner validate $R/call1-validate-gemm-heavy.json --hardware $hw --json-out $OUT/kc/gemm-heavy.json 2>&1 | stamp > $OUT/kc/gemm-heavy.log
TRAINSIM_TIME_KERNEL_CLASSES=1 ./build-gpu/planner validate scenarios/validate-llama-one-gpu.json --hardware $hw --json-out $OUT/kc/llama-kc.json 2>&1 | stamp > $OUT/kc/llama-kc.log
kill $smi
tail -5 $OUT/kc/*.log
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz .

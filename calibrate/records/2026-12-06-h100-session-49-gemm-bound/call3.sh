#!/usr/bin/env bash
# Session 49, device call 3. On an H200: calibrate h200-sxm with the current GEMM grid, then the
# GEMM-bound scenario against it. On an H100: the kernel-mix sweeps the H200 ran in session 15 and
# the H100 has not (a small and a mid-size GEMM, the unfused attention at Llama 1.1B's and
# Llama 2 7B's shapes), for a power model of the clock a step holds.
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$gpu" > $OUT/which.txt
case "$gpu" in
  *H200*)
    PACK=1 HARDWARE=h200-sxm VALIDATE_SCENARIOS=validate-gemm-heavy bash tools/gpu_session.sh calibrate validate-clocks ;;
  *)
    PACK=1 KMIX_FALLING=0 KMIX_LOADS="2048,3072,768 16384,3072,768 4,32,2048,64,8 1,32,4096,128,1" \
      bash tools/gpu_session.sh kernel-mix ;;
esac

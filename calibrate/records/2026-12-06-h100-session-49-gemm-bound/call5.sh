#!/usr/bin/env bash
# Session 49, device call 5. On an H200: calibrate h200-sxm with the current GEMM grid, then the
# GEMM-bound and Llama scenarios against it. On an H100: the GEMM-bound scenario only (held-out
# data with the predicted clock).
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$gpu" > $OUT/which.txt
case "$gpu" in
  *H200*) PACK=1 HARDWARE=h200-sxm VALIDATE_SCENARIOS="validate-gemm-heavy validate-llama-one-gpu" bash tools/gpu_session.sh calibrate validate-clocks ;;
  *) PACK=1 HARDWARE=h100-sxm VALIDATE_SCENARIOS="validate-gemm-heavy" bash tools/gpu_session.sh validate-clocks ;;
esac

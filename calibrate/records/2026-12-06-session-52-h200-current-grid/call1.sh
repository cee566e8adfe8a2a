#!/usr/bin/env bash
# Session 52, device call 1, on an H200: calibrate h200-sxm with the current GEMM grid (the token
# grid of session 48: 4,096 tokens, hidden 3,072, Llama logits from hidden 2,048; the weight-gradient
# GEMMs accumulated into fp32, timed on a zeroed output) on top of the profile as it is, then the
# three one-GPU validation scenarios beside the clock log (their records are re-predicted by the
# tests with whatever profile is current). On an H100 instead: the small GPT steps with their GEMMs
# and attention timed inside the step (TRAINSIM_TIME_KERNEL_CLASSES=1), so that each step's kernel
# classes' measured shares can stand in for the predicted ones in the power estimate.
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$gpu" > $OUT/which.txt
case "$gpu" in
  *H200*) ;;
  *)
    OUT=$OUT/kc TRAINSIM_TIME_KERNEL_CLASSES=1 HARDWARE=h100-sxm VALIDATE_SCENARIOS=validate-small-gpt bash tools/gpu_session.sh validate-clocks
    tail -3 $OUT/kc/*.log
    exit 0 ;;
esac
OUT=$OUT/cal PROFILE=h200-sxm bash tools/gpu_session.sh calibrate
OUT=$OUT/val SKIP_BUILD=1 HARDWARE=h200-sxm VALIDATE_SCENARIOS="validate-small-gpt validate-llama-one-gpu validate-one-gpu" \
  bash tools/gpu_session.sh validate-clocks
tail -2 $OUT/val/*.log

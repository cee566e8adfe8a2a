#!/usr/bin/env bash
# Session 52, device call 2, on one H100 (or H200): the one-GPU validation scenarios on a card
# new to the project, each run's instantaneous power recorded beside NVML's 1 s mean; then the GPT
# scenario (760M-2.7B, the steps whose power estimate falls just above the limit) with its kernel
# classes timed in place, as call 1 did for the small GPT.
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
hw=h100-sxm; case "$gpu" in *H200*) hw=h200-sxm ;; esac
echo "$gpu -> $hw" > $OUT/which.txt
OUT=$OUT/val HARDWARE=$hw VALIDATE_SCENARIOS="validate-one-gpu validate-llama-one-gpu validate-long-sequence" \
  bash tools/gpu_session.sh validate-clocks
OUT=$OUT/kc SKIP_BUILD=1 TRAINSIM_TIME_KERNEL_CLASSES=1 HARDWARE=$hw VALIDATE_SCENARIOS=validate-one-gpu \
  bash tools/gpu_session.sh validate-clocks
for f in $OUT/val/*.log $OUT/kc/validate-one-gpu.log; do echo "== $f"; grep -E "runs:|^[0-9/: .]+(gpt|llama)" $f | tail -12; done

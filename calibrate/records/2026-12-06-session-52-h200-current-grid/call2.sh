#!/usr/bin/env bash
# Session 52, device call 2, on one H100 (or H200): where a step's power goes, class by class,
# inside the step. The small GPT and GPT scenarios run plain, then with every GEMM call run three
# times (TRAINSIM_REPEAT_KERNEL_CLASS=gemm:3), then every attention forward and backward three
# times (=attention:3), back to back on the same card: each class's power in the step is the
# added energy over the added time, (P2 T2 - P1 T1) / (T2 - T1). Then the GPT scenario with its kernel
# classes timed in place, and the Llama scenario plain (a card new to the project: more held-out
# runs with their instantaneous power).
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
hw=h100-sxm; case "$gpu" in *H200*) hw=h200-sxm ;; esac
echo "$gpu -> $hw" > $OUT/which.txt
OUT=$OUT/plain HARDWARE=$hw VALIDATE_SCENARIOS="validate-small-gpt validate-one-gpu" bash tools/gpu_session.sh validate-clocks
for c in gemm attention; do  # each call three times: twice the added time of a repeat, half the error
  OUT=$OUT/$c SKIP_BUILD=1 TRAINSIM_REPEAT_KERNEL_CLASS=$c:3 HARDWARE=$hw VALIDATE_SCENARIOS="validate-small-gpt validate-one-gpu" \
    bash tools/gpu_session.sh validate-clocks
done
OUT=$OUT/kc SKIP_BUILD=1 TRAINSIM_TIME_KERNEL_CLASSES=1 HARDWARE=$hw VALIDATE_SCENARIOS=validate-one-gpu \
  bash tools/gpu_session.sh validate-clocks
OUT=$OUT/llama SKIP_BUILD=1 HARDWARE=$hw VALIDATE_SCENARIOS=validate-llama-one-gpu bash tools/gpu_session.sh validate-clocks
for f in $OUT/*/validate-*.log; do echo "== $f"; grep -E "runs:|(gpt|llama)[-0-9a-z.]* +mb" $f | cut -c25- | tail -8; done

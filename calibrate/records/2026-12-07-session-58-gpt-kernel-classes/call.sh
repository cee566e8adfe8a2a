#!/usr/bin/env bash
# Session 58, on whichever card comes: session 54's call 3 as committed (the profile of that part
# held out on the three one-GPU validate scenarios, the clock predicted beside each run, GPT's
# element-wise kernels swept alone; packed into all.tgz), then the GPT scenario once more with
# every GEMM, attention call and element-wise kernel timed in place
# (TRAINSIM_TIME_KERNEL_CLASSES=1) into $OUT/kc: where GPT 2.7B at micro-batch 1, priced 3-4% long
# on the last four H100 cards, and GPT 350M, 2-3% long on the last three H200s, spend their time
# against the model. About five minutes.
set -u
export NCCL_NVLS_ENABLE=0
bash calibrate/records/2026-12-06-session-54-h100-gpt-power/call3.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in *H200*) hw=h200-sxm ;; *) hw=h100-sxm ;; esac
TRAINSIM_TIME_KERNEL_CLASSES=1 OUT=$OUT/kc VALIDATE=validate-one-gpu HARDWARE=$hw SKIP_BUILD=1 bash tools/gpu_session.sh validate
grep -E "gpt-2.7b|gpt-350m|GEMM|other kernels" -A0 $OUT/kc/validate.log | head -40

#!/usr/bin/env bash
# Session 58, a fourth call, on an H100 held out from the re-timed attention table: the Llama
# scenario validated beside the clock log, then the GPT scenario with every kernel timed in place
# (TRAINSIM_TIME_KERNEL_CLASSES=1): the step's attention against the new table. Packed into all.tgz.
set -u
export NCCL_NVLS_ENABLE=0
OUT=$OUT/val HARDWARE=h100-sxm VALIDATE_SCENARIOS="validate-llama-one-gpu" bash tools/gpu_session.sh validate-clocks
TRAINSIM_TIME_KERNEL_CLASSES=1 OUT=$OUT/kc VALIDATE=validate-one-gpu HARDWARE=h100-sxm SKIP_BUILD=1 bash tools/gpu_session.sh validate
grep -h "runs: median\|^2026.*llama\|GEMM .* vs .* attention" $OUT/val/*.log $OUT/kc/validate.log
cd $OUT && tar czf /tmp/all.tgz val kc && rm -rf val kc && mv /tmp/all.tgz .

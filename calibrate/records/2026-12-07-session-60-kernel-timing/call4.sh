#!/usr/bin/env bash
# A fourth call, the same warm machine as call3.sh (an H100, GPU-281247dc): the GPT and small GPT
# scenarios validated with the committed h100-sxm, held out, packed into call4.tgz.
O=/tmp/o4; mkdir -p $O; export NCCL_NVLS_ENABLE=0
OUT=$O/val-before HARDWARE=h100-sxm VALIDATE_SCENARIOS="validate-one-gpu validate-small-gpt" SKIP_BUILD=1 timeout 150 bash tools/gpu_session.sh validate-clocks > /dev/null
grep -h "runs: median" $O/val-before/*.log; nvidia-smi --query-gpu=uuid --format=csv,noheader; tar czf $OUT/call4.tgz -C $O .

#!/usr/bin/env bash
# The same warm machine (same card) right after call.sh, whose validation archive did not come
# back: the GPT and small GPT scenarios with the committed table and with call 1's evicted and
# single tables, then the GPT scenario's kernels timed in place; everything in one archive.
set -u
export NCCL_NVLS_ENABLE=0
here=calibrate/records/2026-12-07-session-60-kernel-timing
hw=h100-sxm
mkdir -p /tmp/o && O=/tmp/o
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $O/which.txt
cp models/hardware/$hw.json /tmp/committed.json
scen="validate-one-gpu validate-small-gpt"
for v in committed evicted single; do
  cp /tmp/committed.json models/hardware/$hw.json
  [ $v = committed ] || ./build-gpu/calibrate kernel-table --into models/hardware/$hw.json $here/call1/kernel-run-$v.json >> $O/kernel-table.log 2>&1 || continue
  OUT=$O/val-$v HARDWARE=$hw VALIDATE_SCENARIOS="$scen" SKIP_BUILD=1 timeout 110 bash tools/gpu_session.sh validate-clocks > /dev/null
done
cp /tmp/committed.json models/hardware/$hw.json
TRAINSIM_TIME_KERNEL_CLASSES=1 OUT=$O/kc VALIDATE=validate-one-gpu HARDWARE=$hw SKIP_BUILD=1 timeout 70 bash tools/gpu_session.sh validate > /dev/null
for d in $O/val-*; do echo "== $d"; grep -h "runs: median" $d/*.log; done
tar czf $OUT/call2.tgz -C $O .

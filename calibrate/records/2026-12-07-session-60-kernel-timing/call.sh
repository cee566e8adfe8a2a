#!/usr/bin/env bash
# Session 60: how should calibrate time the step's element-wise and row-wise kernels? One call:
#  1. calibrate kernel-conditions (24 GPT shapes; each kernel timed in bursts of ten, one call, one
#     call with its operands evicted from L2, after FMA work, under GEMM load, in bursts on a full
#     device; the GeLU backward also in place, as the step calls it).
#  2. This card's kernel table at a full calibrate's 11 GPT shapes timed three ways
#     (kernel-table --out --shapes profile --timing burst|evicted|single).
#  3. The GPT and small GPT scenarios validated with the committed profile (val-committed/), then
#     with each of this card's three tables written into the machine's copy of the profile
#     (val-evicted/, val-burst/, val-single/; only the kernel table differs from the committed one).
#  4. The GPT scenario with every kernel timed in place, committed profile (kc/).
# Validation folders are packed into val.tgz.
set -u
export NCCL_NVLS_ENABLE=0
OUT=$OUT bash tools/gpu_session.sh || exit 1
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
case "$(head -1 $OUT/which.txt)" in *H200*) hw=h200-sxm ;; *) hw=h100-sxm ;; esac
echo "profile $hw" >> $OUT/which.txt
stamp() { echo "[$(date +%T)] $*" >> $OUT/which.txt; }
stamp "kernel-conditions"
timeout 240 ./build-gpu/calibrate kernel-conditions > $OUT/kernel-conditions.txt 2>&1
echo "exit $?" >> $OUT/kernel-conditions.txt
for t in burst evicted single; do
  stamp "kernel-table $t"
  timeout 60 ./build-gpu/calibrate kernel-table --out $OUT/kernel-run-$t.json --shapes profile --timing $t >> $OUT/kernel-table.log 2>&1
  echo "exit $?" >> $OUT/kernel-table.log
done
cp models/hardware/$hw.json /tmp/committed.json
scen="validate-one-gpu validate-small-gpt"
for v in committed evicted burst single; do
  cp /tmp/committed.json models/hardware/$hw.json
  if [ $v != committed ]; then
    [ -f $OUT/kernel-run-$v.json ] || continue
    ./build-gpu/calibrate kernel-table --into models/hardware/$hw.json $OUT/kernel-run-$v.json >> $OUT/kernel-table.log 2>&1 || continue
  fi
  stamp "validate with the $v table"
  OUT=$OUT/val-$v HARDWARE=$hw VALIDATE_SCENARIOS="$scen" SKIP_BUILD=1 timeout 110 bash tools/gpu_session.sh validate-clocks > /dev/null
done
cp /tmp/committed.json models/hardware/$hw.json
stamp "kernels in place"
TRAINSIM_TIME_KERNEL_CLASSES=1 OUT=$OUT/kc VALIDATE=validate-one-gpu HARDWARE=$hw SKIP_BUILD=1 timeout 70 bash tools/gpu_session.sh validate > /dev/null
stamp "done"
for d in $OUT/val-*; do echo "== $d"; grep -h "runs: median" $d/*.log; done
tail -3 $OUT/kernel-conditions.txt
cd $OUT && tar czf /tmp/val.tgz val-* kc && rm -rf val-* kc && mv /tmp/val.tgz .

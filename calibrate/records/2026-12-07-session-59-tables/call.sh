#!/usr/bin/env bash
# Session 59: tables timed apart from a full calibration, on this card, and the GPT scenarios
# validated before and after they are written into the part's profile, on the same card.
#  1. On an H200, its attention table (calibrate attention-table --out, each shape after 300 ms
#     idle) into $OUT/attention-run.json; on any card, the step kernels' table at calibrate's
#     denser shapes (calibrate kernel-table --out) into $OUT/kernel-run.json.
#  2. The GPT and small GPT scenarios validated with the committed profile (val-before/).
#  3. Runs of this part committed beside this script (<part>-attention-run*.json,
#     <part>-kernel-run*.json) written into this machine's copy of the profile (--into): a
#     held-out test of those runs' tables on this card; where none are committed, this card's own
#     runs. The same scenarios validated again (val-after/), then the GPT scenario with every
#     kernel timed in place (kc/, TRAINSIM_TIME_KERNEL_CLASSES=1).
# Validation files are packed into val.tgz.
set -u
export NCCL_NVLS_ENABLE=0
here=calibrate/records/2026-12-07-session-59-tables
OUT=$OUT bash tools/gpu_session.sh || exit 1
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
case "$(head -1 $OUT/which.txt)" in *H200*) hw=h200-sxm ;; *) hw=h100-sxm ;; esac
echo "profile $hw" >> $OUT/which.txt
if [ $hw = h200-sxm ]; then
  ./build-gpu/calibrate attention-table --out $OUT/attention-run.json > $OUT/attention-table.log 2>&1
  echo "exit $?" >> $OUT/attention-table.log
  tail -2 $OUT/attention-table.log
fi
./build-gpu/calibrate kernel-table --out $OUT/kernel-run.json > $OUT/kernel-table.log 2>&1
echo "exit $?" >> $OUT/kernel-table.log
tail -2 $OUT/kernel-table.log
scen="validate-one-gpu validate-small-gpt"
OUT=$OUT/val-before HARDWARE=$hw VALIDATE_SCENARIOS="$scen" SKIP_BUILD=1 bash tools/gpu_session.sh validate-clocks > /dev/null
for kind in attention kernel; do
  runs=$(ls $here/$hw-$kind-run*.json 2>/dev/null)
  [ -z "$runs" ] && [ -f $OUT/$kind-run.json ] && runs=$OUT/$kind-run.json
  [ -z "$runs" ] && continue
  echo "$kind table from: $runs" | tee -a $OUT/which.txt
  ./build-gpu/calibrate $kind-table --into models/hardware/$hw.json $runs >> $OUT/$kind-table.log 2>&1 || exit 1
done
cp models/hardware/$hw.json $OUT/$hw-with-runs.json
OUT=$OUT/val-after HARDWARE=$hw VALIDATE_SCENARIOS="$scen" SKIP_BUILD=1 bash tools/gpu_session.sh validate-clocks > /dev/null
TRAINSIM_TIME_KERNEL_CLASSES=1 OUT=$OUT/kc VALIDATE=validate-one-gpu HARDWARE=$hw SKIP_BUILD=1 bash tools/gpu_session.sh validate > /dev/null
for d in val-before val-after; do echo "== $d"; grep -h "runs: median" $OUT/$d/*.log; done
cd $OUT && tar czf /tmp/val.tgz val-before val-after kc && rm -rf val-before val-after kc && mv /tmp/val.tgz .

#!/usr/bin/env bash
# Session 59: tables timed apart from a full calibration, on this card. On an H200, its attention
# table (calibrate attention-table --out, each shape after 300 ms idle) into
# $OUT/attention-run.json; on any card, the step kernels' table at calibrate's denser shapes
# (calibrate kernel-table --out) into $OUT/kernel-run.json. Where runs of this part from earlier
# calls are committed beside this script (<part>-attention-run*.json, <part>-kernel-run*.json),
# they are then written into this machine's copy of the part's profile and the GPT scenarios
# validated with it: a held-out test of those runs' tables on this card. Validation files are
# packed into val.tgz.
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
found=
if ls $here/$hw-attention-run*.json > /dev/null 2>&1; then
  ./build-gpu/calibrate attention-table --into models/hardware/$hw.json $here/$hw-attention-run*.json >> $OUT/attention-table.log 2>&1 || exit 1
  found=1
fi
if ls $here/$hw-kernel-run*.json > /dev/null 2>&1; then
  ./build-gpu/calibrate kernel-table --into models/hardware/$hw.json $here/$hw-kernel-run*.json >> $OUT/kernel-table.log 2>&1 || exit 1
  found=1
fi
[ -n "$found" ] || exit 0
cp models/hardware/$hw.json $OUT/$hw-with-runs.json
OUT=$OUT/val HARDWARE=$hw VALIDATE_SCENARIOS="validate-one-gpu validate-small-gpt" SKIP_BUILD=1 bash tools/gpu_session.sh validate-clocks
grep -h "runs: median\|gpt-2.7b\|gpt-350m  mb\|gpt-125m  mb1" $OUT/val/*.log
cd $OUT && tar czf /tmp/val.tgz val && rm -rf val && mv /tmp/val.tgz .

#!/usr/bin/env bash
# Session 59: the H200's attention table timed on this card, each shape after 300 ms idle
# (calibrate attention-table --out), into $OUT/attention-run.json. Where runs of this part from
# earlier calls are committed beside this script (<part>-run*.json), they are first written into
# this machine's copy of the part's profile, and the GPT scenarios validated with it: a held-out
# test of those runs' table on this card. Where an H100 comes instead, its table is timed and the
# same scenarios validated with the committed h100-sxm profile (a held-out card). The validation
# files are packed into val.tgz.
set -u
export NCCL_NVLS_ENABLE=0
here=calibrate/records/2026-12-07-session-59-h200-attention-table
OUT=$OUT bash tools/gpu_session.sh || exit 1
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
case "$(head -1 $OUT/which.txt)" in *H200*) hw=h200-sxm ;; *) hw=h100-sxm ;; esac
echo "profile $hw" >> $OUT/which.txt
./build-gpu/calibrate attention-table --out $OUT/attention-run.json > $OUT/attention-table.log 2>&1
echo "exit $?" >> $OUT/attention-table.log
tail -2 $OUT/attention-table.log
if [ $hw = h200-sxm ]; then
  ls $here/$hw-run*.json > /dev/null 2>&1 || exit 0
  ./build-gpu/calibrate attention-table --into models/hardware/$hw.json $here/$hw-run*.json >> $OUT/attention-table.log 2>&1 || exit 1
  cp models/hardware/$hw.json $OUT/$hw-with-runs.json
fi
OUT=$OUT/val HARDWARE=$hw VALIDATE_SCENARIOS="validate-one-gpu validate-small-gpt" SKIP_BUILD=1 bash tools/gpu_session.sh validate-clocks
grep -h "runs: median\|gpt-2.7b\|gpt-350m  mb1\|gpt-125m  mb1" $OUT/val/*.log
cd $OUT && tar czf /tmp/val.tgz val && rm -rf val && mv /tmp/val.tgz .

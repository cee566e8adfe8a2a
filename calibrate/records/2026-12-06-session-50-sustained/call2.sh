#!/usr/bin/env bash
# Session 50, device call 2 (what device time was left): GPT 125M and 350M, whose power the model
# overestimates most (106 and 74 W at the median), run short beside the same nvidia-smi log as call 1
# (mean and instantaneous power, temperatures, power-cap reason): does the instantaneous reading
# account for part of the excess, as it did for GPT 1.3B (23-44 W)?
set -u
export NCCL_NVLS_ENABLE=0
R=calibrate/records/2026-12-06-session-50-sustained
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
hw=h100-sxm; case "$gpu" in *H200*) hw=h200-sxm ;; esac
echo "$gpu -> $hw" > $OUT/which.txt
OUT=$OUT/s bash tools/gpu_session.sh            # build only
mkdir -p $OUT/t
q=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,temperature.memory,clocks_event_reasons.sw_power_cap,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_slowdown
nvidia-smi -i 0 --query-gpu=$q --format=csv >/dev/null 2>&1 || q=timestamp,clocks.sm,power.draw,temperature.gpu
nvidia-smi -i 0 --query-gpu=$q --format=csv -lms 100 > $OUT/t/clocks.csv 2>&1 &
smi=$!
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date '+%Y/%m/%d %H:%M:%S.%3N')" "$l"; done; }
sleep 3
./build-gpu/planner validate $R/small.json --hardware $hw --json-out $OUT/t/small.json 2>&1 | stamp > $OUT/t/small.log
kill $smi
cat $OUT/t/small.log
python3 $R/sustained.py $OUT/t/clocks.csv $OUT/t/small.json
cd $OUT && tar czf /tmp/all.tgz t s which.txt && find . -mindepth 1 -delete && mv /tmp/all.tgz .

#!/usr/bin/env bash
# Session 50, device call 1. Does a step near the power limit hold the same clock and draw the same
# power when it runs for half a minute as in planner validate's few timed steps? Two such steps
# (short.json, long.json) run short on a cold card, sustained, then short again on the warm card,
# beside an nvidia-smi log of the SM clock, power and temperatures (either part, against its own
# profile).
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
v() { ./build-gpu/planner validate "$1" --hardware $hw --json-out $OUT/t/$2.json 2>&1 | stamp > $OUT/t/$2.log; echo "[$(date +%T)] $2 done ($SECONDS s)" >> $OUT/t/phases.txt; }
sleep 5
v $R/short.json short-cold
v $R/long.json long
v $R/short.json short-warm
sleep 30; echo "[$(date +%T)] idle 30 s" >> $OUT/t/phases.txt
v $R/short.json short-after-idle
kill $smi
tail -4 $OUT/t/*.log; cat $OUT/t/phases.txt
python3 $R/sustained.py $OUT/t/clocks.csv $OUT/t/short-cold.json $OUT/t/long.json $OUT/t/short-warm.json $OUT/t/short-after-idle.json
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz .

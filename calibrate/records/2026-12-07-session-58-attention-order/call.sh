#!/usr/bin/env bash
# Session 58: does an attention shape's calibrated time depend on what calibrate timed before it?
# `calibrate attention-conditions` times calibrate's attention shapes in its order, in the reverse
# order and each after 300 ms idle, beside nvidia-smi's 100 ms clock log. About four minutes.
set -u
export NCCL_NVLS_ENABLE=0
OUT=$OUT bash tools/gpu_session.sh || exit 1
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
q=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap
nvidia-smi -i 0 --query-gpu=$q --format=csv >/dev/null 2>&1 || q=timestamp,clocks.sm,power.draw
nvidia-smi -i 0 --query-gpu=$q --format=csv -lms 100 > $OUT/clocks.csv 2>&1 &
smi=$!
sleep 2
./build-gpu/calibrate attention-conditions --idle-ms 300 > $OUT/attention-conditions.txt 2> $OUT/attention-conditions.err
echo "exit $?" >> $OUT/attention-conditions.err
kill $smi
cat $OUT/attention-conditions.txt

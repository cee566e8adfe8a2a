#!/usr/bin/env bash
# Prepared for the next H200 (not run): the six-run h200-sxm held against a card it was not
# calibrated on (the three one-GPU scenarios, with the clock each run held and the clock the power
# model predicted, GPT steps now priced by GPT-style element-wise power), and GPT's element-wise
# kernels swept alone on that second card (gpt_elementwise_power.py reads it). Everything under
# $OUT is tarred at the end (the device tool returns a limited number of files). About five minutes.
set -u
export NCCL_NVLS_ENABLE=0
pack() { cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz .; }
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
OUT=$OUT/val HARDWARE=h200-sxm VALIDATE_SCENARIOS="validate-small-gpt validate-llama-one-gpu validate-one-gpu" \
  bash tools/gpu_session.sh validate-clocks || { pack; exit 1; }
mkdir -p $OUT/t
q=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap
nvidia-smi -i 0 --query-gpu=$q --format=csv >/dev/null 2>&1 || q=timestamp,clocks.sm,power.draw
nvidia-smi -i 0 --query-gpu=$q --format=csv -lms 100 > $OUT/t/clocks.csv 2>&1 &
smi=$!
sleep 3
for l in 8192,768,3072 4096,768,3072 2048,768,3072 8192,1024,4096 8192,1536,6144 8192,2048,8192 2048,2560,10240; do
  ./build-gpu/calibrate kernel-mix --layer-kind gpt --layer $l --shares 0 --clock-log $OUT/t/clocks.csv >> $OUT/t/kernel-mix.txt 2>&1
done
./build-gpu/calibrate kernel-mix --layer 8192,768,3072 --shares 0 --clock-log $OUT/t/clocks.csv >> $OUT/t/kernel-mix.txt 2>&1
kill $smi
python3 calibrate/records/2026-12-06-session-53-h200-calibration/gpt_elementwise_power.py 1980 $OUT/t/kernel-mix.txt > $OUT/t/gpt-power.txt 2>&1
tail -4 $OUT/val/*.log
cat $OUT/t/gpt-power.txt
pack

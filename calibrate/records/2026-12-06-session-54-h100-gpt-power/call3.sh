#!/usr/bin/env bash
# Session 54, call 3, on whichever card comes (H100 or H200): the committed profile of that part
# held against a card it was not calibrated on (the three one-GPU validate scenarios, with the clock
# each run held and the clock the power model predicted, GPT steps priced by their own element-wise
# power), then GPT's element-wise kernels swept alone on that card at the seven shapes. Everything
# under $OUT is tarred at the end. About five minutes.
set -u
export NCCL_NVLS_ENABLE=0
pack() { cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz .; }
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
case "$(head -1 $OUT/which.txt)" in *H200*) hw=h200-sxm ;; *) hw=h100-sxm ;; esac
echo "profile $hw" >> $OUT/which.txt
OUT=$OUT/val HARDWARE=$hw VALIDATE_SCENARIOS="validate-small-gpt validate-llama-one-gpu validate-one-gpu" \
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

#!/usr/bin/env bash
# Session 51, device call 1. The power model estimates 29-204 W more than the steps that hold the
# highest clock draw. Each kind of kernel is measured here at the steps' own shapes (GPT 125M, 350M,
# 1.3B and Llama 1.1B at micro-batch 4, the long-sequence steps), against the shapes the model's
# terms were read off (Llama 2 7B's element-wise kernels, the 2048 x 3072 x 768 GEMM): calibrate
# kernel-mix with --layer, at share 0 (the element-wise kernels alone) and at high shares of a GEMM
# or the attention. Before it, planner validate records the instantaneous power beside NVML's 1 s
# mean (validate-small-gpt); after it, the GPU tests. One nvidia-smi log
# (mean and instantaneous power, temperature, power-cap reason) runs beside everything.
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
hw=h100-sxm; case "$gpu" in *H200*) hw=h200-sxm ;; esac
echo "$gpu -> $hw" > $OUT/which.txt
OUT=$OUT/s bash tools/gpu_session.sh            # build only
mkdir -p $OUT/t
q=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap
nvidia-smi -i 0 --query-gpu=$q --format=csv >/dev/null 2>&1 || q=timestamp,clocks.sm,power.draw
nvidia-smi -i 0 --query-gpu=$q --format=csv -lms 100 > $OUT/t/clocks.csv 2>&1 &
smi=$!
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date '+%Y/%m/%d %H:%M:%S.%3N')" "$l"; done; }
phase() { echo "[$(date +%T)] $* ($SECONDS s)" >> $OUT/t/phases.txt; }
sleep 3
for s in validate-small-gpt; do
  ./build-gpu/planner validate scenarios/$s.json --hardware $hw --json-out $OUT/t/$s.json 2>&1 | stamp > $OUT/t/$s.log
  phase "validate $s exit ${PIPESTATUS[0]}"
done
km() { ./build-gpu/calibrate kernel-mix --clock-log $OUT/t/clocks.csv "$@" 2>&1 | tee -a $OUT/t/kernel-mix.txt; phase "kernel-mix $* exit ${PIPESTATUS[0]}"; }
# The element-wise kernels alone: GPT 125M at micro-batch 2 and 4, GPT 350M, GPT 1.3B, Llama 1.1B
# at micro-batch 4; Llama 2 7B at 4,096 tokens (the profile's memory_bound_w was read off it).
for l in 4096,768,3072 8192,768,3072 8192,1024,4096 8192,2048,8192 8192,2048,5632 4096,4096,11008; do
  km --layer $l --shares 0
done
# GPT 125M's GEMMs at micro-batch 4 (8,192 tokens), below the lowest rate the model's GEMM power
# was read at, with its own element-wise kernels; then that lowest pair itself, as swept before.
for g in 8192,768,768 8192,3072,768 8192,768,3072; do
  km --layer 8192,768,3072 --gemm $g --shares 0.5,0.9
done
km --gemm 2048,3072,768 --shares 0.6,0.9
# The attention of GPT 125M at micro-batch 4, of GPT 350M and Llama 1.1B at 8,192-token sequences
# (Llama 1.1B's at micro-batch 4 is the shape the model's 618 W was read at).
km --layer 8192,768,3072 --attention 4,12,2048,64,1 --shares 0.5,0.95
km --layer 8192,1024,4096 --attention 1,16,8192,64,1 --shares 0.95
km --layer 8192,2048,5632 --attention 1,32,8192,64,8 --shares 0.95
kill $smi
OUT=$OUT/s bash tools/gpu_session.sh gpu-tests
phase "gpu tests"
tail -3 $OUT/t/*.log; cat $OUT/t/phases.txt
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz .

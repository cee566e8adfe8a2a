#!/usr/bin/env bash
# Session 49, device call 6: kernel-mix sweeps with the GEMMs of the steps whose clock the power
# model predicts too low (Llama 1.1B's gate/up and Q/K/V at micro-batch 4, GPT 1.3B's fc1 at
# micro-batch 4): do they draw what the sweeps' loads of the same rate draw?
set -u
export NCCL_NVLS_ENABLE=0
PACK=1 KMIX_FALLING=0 KMIX_LOADS="8192,11264,2048 8192,2560,2048 8192,8192,2048" bash tools/gpu_session.sh kernel-mix

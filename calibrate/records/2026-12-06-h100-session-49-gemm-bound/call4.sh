#!/usr/bin/env bash
# Session 49, device call 4: planner validate with the clock predicted from each step's kernel mix
# (the Llama and GEMM-bound scenarios, against the profile of the part it runs on), then the GPU
# tests.
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
hw=h100-sxm; case "$gpu" in *H200*) hw=h200-sxm ;; esac
PACK=1 HARDWARE=$hw VALIDATE_SCENARIOS="validate-llama-one-gpu validate-gemm-heavy" bash tools/gpu_session.sh validate-clocks gpu-tests

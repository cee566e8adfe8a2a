#!/usr/bin/env bash
# Session 49, device call 2: the GEMM-bound scenario (scenarios/validate-gemm-heavy.json, two models,
# micro-batches 2-8, every recompute) and the GPT, small-GPT and Llama one-GPU scenarios, each
# predicted with the profile of the part it runs on, beside nvidia-smi's clock log.
set -u
export NCCL_NVLS_ENABLE=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
hw=h100-sxm; case "$gpu" in *H200*) hw=h200-sxm ;; esac
HARDWARE=$hw VALIDATE_SCENARIOS="validate-gemm-heavy validate-llama-one-gpu validate-one-gpu validate-small-gpt" PACK=1 \
  bash tools/gpu_session.sh validate-clocks

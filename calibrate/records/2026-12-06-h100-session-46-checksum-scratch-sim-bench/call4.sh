#!/usr/bin/env bash
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=/tmp/res4; mkdir -p $R
log() { echo "[$(date +%T)] $*" | tee -a $R/session.log; }
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv,noheader >> $R/session.log 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DTRAINSIM_BENCHMARKS=OFF > $R/cmake.log 2>&1
cmake --build build-gpu -j"$(nproc)" --target gpu_tests calibrate > $R/build.log 2>&1 || { log "build failed"; grep error $R/build.log | head; }
log "built; warnings: $(grep -c warning $R/build.log)"
./build-gpu/gpu_tests > $R/gpu-tests.log 2>&1; log "gpu tests exit $?"
grep -E "^\[ info \]|FAILED|PASSED|SKIPPED|Slowdown" $R/gpu-tests.log | tail -12
tar -C /tmp -czf $OUT/res4.tgz res4

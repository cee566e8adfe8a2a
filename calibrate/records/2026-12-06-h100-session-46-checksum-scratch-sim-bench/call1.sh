#!/usr/bin/env bash
# Session 46, call 1: GPU tests and a one-GPU validate with the checksum scratch taken at set-up;
# the simulator's benchmarks on this host's CPU, three sets.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=/tmp/res; mkdir -p $R
log() { echo "[$(date +%T)] $*" | tee -a $R/session.log; }
log "host $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,power.limit --format=csv,noheader >> $R/session.log 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DTRAINSIM_BENCHMARKS=ON > $R/cmake.log 2>&1 || { log "cmake failed"; tail -20 $R/cmake.log; }
cmake --build build-gpu -j"$(nproc)" --target planner gpu_tests sim_benchmarks > $R/build.log 2>&1 || { log "build failed"; grep -E "error" $R/build.log | head -30; }
log "built"
grep -c "warning" $R/build.log | sed 's/^/warnings: /' | tee -a $R/session.log
./build-gpu/gpu_tests > $R/gpu-tests.log 2>&1; log "gpu tests exit $?"
grep -E "FAILED|PASSED|SKIPPED|^\[  +OK" $R/gpu-tests.log | tail -30
./build-gpu/planner validate scenarios/validate-one-gpu.json --json-out $R/validation-one-gpu.json > $R/validate-one-gpu.log 2>&1; log "validate exit $?"
tail -15 $R/validate-one-gpu.log
for set in 1 2 3; do
  ./build-gpu/sim_benchmarks --benchmark_filter='Symmetric175B' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out=$R/sim-bench-$set.json --benchmark_out_format=json > $R/sim-bench-$set.txt 2>&1
  log "sim bench set $set exit $?"; grep median $R/sim-bench-$set.txt | cut -c1-100
done
tar -C /tmp -czf $OUT/res.tgz res

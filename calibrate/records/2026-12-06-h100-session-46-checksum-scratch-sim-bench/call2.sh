#!/usr/bin/env bash
# Session 46, call 2 (an H100 only): the three one-GPU validate scenarios predicted with the
# measured h100-sxm profile (--hardware h100-sxm), on whatever H100 card came.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=/tmp/res2; mkdir -p $R
log() { echo "[$(date +%T)] $*" | tee -a $R/session.log; }
log "host $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,power.limit --format=csv,noheader >> $R/session.log 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DTRAINSIM_BENCHMARKS=OFF > $R/cmake.log 2>&1 || { log "cmake failed"; tail -20 $R/cmake.log; }
cmake --build build-gpu -j"$(nproc)" --target planner planner-gpu > $R/build.log 2>&1 || { log "build failed"; grep -E "error" $R/build.log | head -30; }
log "built; warnings: $(grep -c warning $R/build.log)"
for name in validate-one-gpu validate-small-gpt validate-llama-one-gpu; do
  ./build-gpu/planner validate scenarios/$name.json --hardware h100-sxm --json-out $R/$name.json > $R/$name.log 2>&1
  log "$name exit $?"
  grep -vE "^validate: (warning|--hardware)" $R/$name.log | tail -14
done
tar -C /tmp -czf $OUT/res2.tgz res2

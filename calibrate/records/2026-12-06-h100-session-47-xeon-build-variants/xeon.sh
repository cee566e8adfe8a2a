#!/usr/bin/env bash
# Xeon host: PMU counters of the warm interleaved step, and three builds alternated (base, PGO, -march=native).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }
log "cpu: $(grep -m1 'model name' /proc/cpuinfo) / $(nproc) cores / paranoid $(cat /proc/sys/kernel/perf_event_paranoid)"
lscpu > "$OUT/lscpu.txt" 2>&1
git log -1 --format=%H >> "$OUT/log.txt"
gcc -O2 -o /tmp/pmu ab/pmu.c || log "pmu build failed"
common=(-DCMAKE_BUILD_TYPE=Release -DTRAINSIM_CUDA=OFF -DBUILD_TESTING=ON -DTRAINSIM_BENCHMARKS=ON)
build() { local dir=$1; shift; cmake -S . -B "$dir" "${common[@]}" "$@" > "$OUT/cfg-${dir##*/}.log" 2>&1 && cmake --build "$dir" -j"$(nproc)" --target sim_benchmarks > "$OUT/build-${dir##*/}.log" 2>&1 || log "build $dir failed"; }
build /tmp/b-base
build /tmp/b-native "-DCMAKE_CXX_FLAGS=-march=native"
build /tmp/b-pgo "-DCMAKE_CXX_FLAGS=-fprofile-generate -fprofile-update=atomic"
log "pgo training"
/tmp/b-pgo/sim_benchmarks --benchmark_filter='Symmetric|Search175B|Engine' > "$OUT/pgo-train.txt" 2>&1
cmake -S . -B /tmp/b-pgo "-DCMAKE_CXX_FLAGS=-fprofile-use -fprofile-partial-training -Wno-missing-profile" > "$OUT/cfg-pgo-use.log" 2>&1 &&
  cmake --build /tmp/b-pgo -j"$(nproc)" --target sim_benchmarks > "$OUT/build-pgo-use.log" 2>&1 || log "pgo use build failed"
log built
for v in base pgo; do for it in 200 2000; do
  /tmp/pmu /tmp/b-$v/sim_benchmarks --benchmark_filter='Symmetric175B/interleaved:1/warm:1' --benchmark_min_time=${it}x > "$OUT/pmu-$v-$it.txt" 2>&1
done; done
log "pmu done"
for r in 1 2 3 4; do for v in base pgo native; do
  /tmp/b-$v/sim_benchmarks --benchmark_filter='Symmetric175B/interleaved:./warm:1' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 |
    grep median | sed "s/^/$r $v /" | tee -a "$OUT/ab.txt"
done; done
log done

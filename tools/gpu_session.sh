#!/usr/bin/env bash
# One device session: build, check and measure everything in one call (run from the repo root on
# the GPU machine). Results land in $OUT; the profile is also written in place.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/session.log"; }
log "host: $(nproc) cores"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
# Every GPU by UUID, so that records of different calls can say whether they ran on the same card.
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,power.limit --format=csv,noheader |
  while IFS= read -r gpu; do log "gpu $gpu"; done
# SKIP_BUILD=1: only steps that build what they need themselves (sim-bench).
if [ -z "${SKIP_BUILD:-}" ]; then
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DTRAINSIM_BENCHMARKS=OFF > /tmp/cmake.log 2>&1 || { log "cmake failed"; tail -30 /tmp/cmake.log; exit 1; }
  cmake --build build-gpu -j"$(nproc)" > "$OUT/build.log" 2>&1 || { log "build failed"; grep -E "error" "$OUT/build.log" | head -30; exit 1; }
  log "built"
fi
# The clock log's columns: with the instantaneous power and the power-cap reason where this
# driver's nvidia-smi knows them (calibrate's clock-log reader takes columns by the header).
smi_query=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap
nvidia-smi -i 0 --query-gpu=$smi_query --format=csv > /dev/null 2>&1 || smi_query=timestamp,clocks.sm,power.draw
# HARDWARE: the validate steps predict with this profile instead of their scenarios' (planner
# validate --hardware), to check another card against its own profile.
hw_flag=()
[ -n "${HARDWARE:-}" ] && hw_flag=(--hardware "$HARDWARE")
for step in "$@"; do
  case "$step" in
    calibrate)
      # PROFILE names the profile measured (default: h200-sxm on an H200, h100-sxm on an H100 SXM,
      # which reports itself as "H100 80GB HBM3"; any other part must be named). On top of the
      # profile where there is one: what this machine cannot measure (the multi-GPU record of a
      # machine with more GPUs, the peaks, the network) stays. Written in place, so later steps of
      # this call use it.
      gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
      case "$gpu_name" in
        *H200*) default_profile=h200-sxm ;;
        *"H100 80GB HBM3"*) default_profile=h100-sxm ;;
        *) default_profile= ;;
      esac
      profile=${PROFILE:-$default_profile}
      if [ -z "$profile" ]; then log "calibrate: no profile for '$gpu_name'; set PROFILE"; continue; fi
      log "calibrate (full) as $profile"
      base=calibrate/datasheets/$profile.json
      [ -f "models/hardware/$profile.json" ] && base=models/hardware/$profile.json
      mkdir -p models/hardware; ./build-gpu/calibrate --out "/tmp/$profile.json" --base "$base" 2>&1 | tee "$OUT/calibrate.log"
      log "calibrate exit ${PIPESTATUS[0]}"
      cp "/tmp/$profile.json" "models/hardware/$profile.json" && cp "/tmp/$profile.json" "$OUT/" ;;
    kernel-conditions)
      # The step's element-wise kernels timed six ways (a diagnostic; calibrate kernel-conditions
      # --help lists them), among them as calibrate records them and right after sustained GEMMs.
      log "calibrate kernel-conditions"
      ./build-gpu/calibrate kernel-conditions 2>&1 | tee "$OUT/kernel-conditions.txt"
      log "kernel-conditions exit ${PIPESTATUS[0]}" ;;
    kernel-mix)
      # A Llama-style layer's element-wise kernels inside sustained mixes with tensor-core work (a
      # diagnostic), shares rising, for each load of KMIX_LOADS (space-separated: "m,n,k" a bf16
      # GEMM, "batch,heads,seq,head_dim,group" the unfused attention), then falling for the first
      # (KMIX_FALLING=0: not), beside nvidia-smi's SM clock and power log.
      log "calibrate kernel-mix"
      nvidia-smi -i 0 --query-gpu="$smi_query" --format=csv -lms 100 > "$OUT/clocks-kernel-mix.csv" 2>&1 &
      smi=$!
      sleep 1
      loads=${KMIX_LOADS:-4096,11008,4096}
      load_flag() { [ "$(echo "$1" | tr -cd , | wc -c)" = 4 ] && echo --attention || echo --gemm; }
      for g in $loads; do
        ./build-gpu/calibrate kernel-mix "$(load_flag "$g")" "$g" --clock-log "$OUT/clocks-kernel-mix.csv" 2>&1 | tee -a "$OUT/kernel-mix.txt"
        log "kernel-mix $g (rising) exit ${PIPESTATUS[0]}"
      done
      if [ "${KMIX_FALLING:-1}" != 0 ]; then
        g=${loads%% *}
        ./build-gpu/calibrate kernel-mix "$(load_flag "$g")" "$g" --shares 0.95,0.9,0.8,0.7,0.6,0.5,0.3,0 \
          --clock-log "$OUT/clocks-kernel-mix.csv" 2>&1 | tee -a "$OUT/kernel-mix.txt"
        log "kernel-mix $g (falling) exit ${PIPESTATUS[0]}"
      fi
      kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null ;;
    validate-clocks)
      # One-GPU validate scenarios (VALIDATE_SCENARIOS, space-separated names) beside nvidia-smi's
      # SM clock and power log; every output line stamped with the host's time as nvidia-smi
      # stamps its samples, so that each run's clock can be read off the log.
      nvidia-smi -i 0 --query-gpu="$smi_query" --format=csv -lms 100 > "$OUT/clocks-validate.csv" 2>&1 &
      smi=$!
      for name in ${VALIDATE_SCENARIOS:-validate-small-gpt validate-llama-one-gpu}; do
        log "validate $name beside the clock log"
        ./build-gpu/planner validate "scenarios/$name.json" "${hw_flag[@]}" --json-out "$OUT/$name.json" 2>&1 |
          while IFS= read -r line; do printf '%s %s\n' "$(date '+%Y/%m/%d %H:%M:%S.%3N')" "$line"; done | tee "$OUT/$name.log"
        log "validate $name exit ${PIPESTATUS[0]}"
      done
      kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null ;;
    calibrate-quick)
      log "calibrate --quick"
      ./build-gpu/calibrate --quick --out "$OUT/h200-sxm.quick.json" --base calibrate/datasheets/h200-sxm.json 2>&1 | tee "$OUT/calibrate-quick.log"
      log "calibrate --quick exit ${PIPESTATUS[0]}" ;;
    across-nodes)
      # Every rank this machine has, under mpirun; NCCL's INFO logs are kept in $OUT.
      n=$(nvidia-smi -L | wc -l)
      log "calibrate --across-nodes with $n ranks"
      TRAINSIM_NCCL_LOG_DIR="$OUT" mpirun --allow-run-as-root --oversubscribe -np "$n" -x NCCL_NVLS_ENABLE -x TRAINSIM_NCCL_LOG_DIR \
        ./build-gpu/calibrate --across-nodes --quick --base models/hardware/h200-sxm.json --out "$OUT/h200-across-nodes.json" 2>&1 | tee "$OUT/across-nodes.log"
      log "calibrate --across-nodes exit ${PIPESTATUS[0]}" ;;
    socket-calibrate)
      # The network path forced on this host: NCCL without peer-to-peer or shared memory, every
      # rank counted as its own node; the fit becomes inter_node of h200-socket-loopback.
      n=$(nvidia-smi -L | wc -l)
      log "calibrate --across-nodes --rank-per-node over sockets, $n ranks"
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 TRAINSIM_NCCL_LOG_DIR=/tmp mpirun --allow-run-as-root --oversubscribe -np "$n" \
        -x NCCL_NVLS_ENABLE -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x TRAINSIM_NCCL_LOG_DIR \
        ./build-gpu/calibrate --across-nodes --rank-per-node --allow-socket --quick --base models/hardware/h200-sxm.json \
        --out models/hardware/h200-socket-loopback.json 2>&1 | tee "$OUT/socket-calibrate.log"
      log "socket calibrate exit ${PIPESTATUS[0]}"
      cp models/hardware/h200-socket-loopback.json "$OUT/" 2>/dev/null ;;
    validate-slow)
      n=$(nvidia-smi -L | wc -l)
      log "validate over the forced network path, $n ranks"
      mpirun --allow-run-as-root --oversubscribe -np "$n" -x NCCL_NVLS_ENABLE \
        ./build-gpu/planner validate scenarios/validate-slow-path.json --json-out "$OUT/validation-slow.json" 2>&1 | tee "$OUT/validate-slow.log"
      log "validate-slow exit ${PIPESTATUS[0]}" ;;
    validate-dp)
      # Data-parallel replicas under mpirun: one per GPU when there are enough, else sharing GPU 0
      # (numerics only). Then the same scenario on one GPU.
      n=${DP_RANKS:-2}
      log "validate data parallel, $n ranks"
      mpirun --allow-run-as-root --oversubscribe -np "$n" -x NCCL_NVLS_ENABLE \
        ./build-gpu/planner validate scenarios/validate-data-parallel.json --json-out "$OUT/validation-dp.json" 2>&1 | tee "$OUT/validate-dp.log"
      log "validate-dp exit ${PIPESTATUS[0]}" ;;
    validate-mp|validate-mpi:*)
      # A validate scenario under mpirun (validate-mpi:<scenario name>; validate-mp: the tensor- and
      # pipeline-parallel one): one rank per GPU, or RANKS ranks sharing the GPUs (numerics only)
      # when there are fewer.
      name=${step#validate-mpi:}
      [ "$step" = validate-mp ] && name=validate-model-parallel
      n=${RANKS:-${MP_RANKS:-$(nvidia-smi -L | wc -l)}}
      [ "$n" -lt 2 ] && n=2
      log "validate $name, $n ranks"
      mpirun --allow-run-as-root --oversubscribe -np "$n" -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
        ./build-gpu/planner validate "scenarios/$name.json" "${hw_flag[@]}" --json-out "$OUT/validation-$name-$n.json" 2>&1 | tee "$OUT/validate-$name-$n.log"
      log "validate $name exit ${PIPESTATUS[0]}" ;;
    gpu-tests)
      log "gpu tests"
      cmake -S . -B build-gpu -DBUILD_TESTING=ON > /dev/null 2>&1 && cmake --build build-gpu -j"$(nproc)" --target gpu_tests > "$OUT/build-tests.log" 2>&1
      ./build-gpu/gpu_tests > "$OUT/gpu-tests.log" 2>&1
      status=$?
      grep -E "^\[ info \]|FAILED|PASSED|SKIPPED" "$OUT/gpu-tests.log" | tail -40
      log "gpu tests exit $status" ;;
    sim-bench)
      # The simulator's benchmarks on this host's CPU (no GPU involved): five repetitions each.
      log "sim benchmarks: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
      cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DTRAINSIM_CUDA=OFF -DBUILD_TESTING=ON -DTRAINSIM_BENCHMARKS=ON > /tmp/cmake-bench.log 2>&1 &&
        cmake --build build-bench -j"$(nproc)" --target sim_benchmarks > "$OUT/build-bench.log" 2>&1 || { log "bench build failed"; tail -20 "$OUT/build-bench.log"; }
      grep -m1 'model name' /proc/cpuinfo > "$OUT/cpu.txt"
      ./build-bench/sim_benchmarks --benchmark_filter="${BENCH_FILTER:-Symmetric|Search|Full}" --benchmark_repetitions=5 \
        --benchmark_out="$OUT/sim-benchmarks.json" --benchmark_out_format=json 2>&1 | tee "$OUT/sim-benchmarks.txt" | grep -E "median|Benchmark"
      log "sim benchmarks exit ${PIPESTATUS[0]}" ;;
    validate)
      log "validate"
      ./build-gpu/planner validate "scenarios/${VALIDATE:-validate-one-gpu}.json" "${hw_flag[@]}" --json-out "$OUT/validation-${HARDWARE:-h200}.json" 2>&1 | tee "$OUT/validate.log"
      log "validate exit ${PIPESTATUS[0]}" ;;
  esac
done
log "done"
# Everything in one archive: the device tool brings back a limited number of files.
if [ -n "${PACK:-}" ]; then
  tar czf /tmp/session.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/session.tgz "$OUT/"
fi

#!/usr/bin/env bash
# One call, on whichever card comes, everything packed into one archive ($OUT/call.tgz).
# On an H200: its attention table timed after idle (calibrate attention-table --out), the GPT and
# small GPT scenarios validated with the committed h200-sxm (val-before/) and with that run written
# into the machine's copy of it (val-after/) — the A/B session 60's record prepared.
# On an H100: the GPT, small GPT and Llama scenarios validated with the committed h100-sxm, held
# out (val-before/), and the symmetric 175B benchmarks on the host CPU (bench/).
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/o && mkdir -p $O
OUT=$O bash tools/gpu_session.sh || { tar czf $OUT/call.tgz -C $O .; exit 1; }
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $O/which.txt
case "$(head -1 $O/which.txt)" in *H200*) hw=h200-sxm ;; *) hw=h100-sxm ;; esac
echo "profile $hw" >> $O/which.txt
if [ $hw = h200-sxm ]; then
  timeout 150 ./build-gpu/calibrate attention-table --out $O/attention-run.json > $O/attention-table.log 2>&1
  echo "exit $?" >> $O/attention-table.log
  scen="validate-one-gpu validate-small-gpt"
  OUT=$O/val-before HARDWARE=$hw VALIDATE_SCENARIOS="$scen" SKIP_BUILD=1 timeout 160 bash tools/gpu_session.sh validate-clocks > /dev/null
  if ./build-gpu/calibrate attention-table --into models/hardware/$hw.json $O/attention-run.json >> $O/attention-table.log 2>&1; then
    cp models/hardware/$hw.json $O/$hw-with-run.json
    OUT=$O/val-after HARDWARE=$hw VALIDATE_SCENARIOS="$scen" SKIP_BUILD=1 timeout 160 bash tools/gpu_session.sh validate-clocks > /dev/null
  fi
else
  OUT=$O/val-before HARDWARE=$hw VALIDATE_SCENARIOS="validate-one-gpu validate-small-gpt validate-llama-one-gpu" SKIP_BUILD=1 timeout 420 bash tools/gpu_session.sh validate-clocks > /dev/null
fi
# The symmetric 175B steps of issue #3 timed on this host's CPU (build-bench, no GPU involved);
# on an H100 only, where the call has the time.
[ $hw = h100-sxm ] && OUT=$O/bench BENCH_FILTER=Symmetric175B SKIP_BUILD=1 timeout 200 bash tools/gpu_session.sh sim-bench > /dev/null 2>&1
grep -E "median" $O/bench/sim-benchmarks.txt 2>/dev/null
cat $O/which.txt
for d in $O/val-*; do echo "== $d"; grep -h "runs: median" $d/*.log; done
tar czf $OUT/call.tgz -C $O .

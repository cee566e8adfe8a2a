#!/usr/bin/env bash
# Session 55, call 2: how often NVML's instantaneous power changes. GPT 760M at micro-batch 4 and 2
# (0.198 and 0.101 s a micro-batch on an H100) for 12 timed steps each, with nvidia-smi reading
# power.draw (the 1 s mean) and power.draw.instant as fast as it will (-lms 5) beside the run.
# From the repository root, on one GPU: bash calibrate/records/2026-12-07-session-55-h100-held-out/call2.sh
set -u
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/which.txt
case "$(head -1 $OUT/which.txt)" in *H200*) hw=h200-sxm ;; *) hw=h100-sxm ;; esac
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DTRAINSIM_BENCHMARKS=OFF > $OUT/cmake.log 2>&1
cmake --build build-gpu -j"$(nproc)" --target planner planner-gpu > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
python3 - > /tmp/v760.json <<'PY'
import json
s = json.load(open("scenarios/validate-one-gpu.json"))
s["name"] = "gpt-760m-power-readings"
s["validate"] = {"models": ["gpt-760m"], "micro_batch": [2, 4], "recompute": ["none"], "top": 2, "timed_steps": 12}
print(json.dumps(s, indent=1))
PY
nvidia-smi -i 0 --query-gpu=timestamp,power.draw,power.draw.instant,clocks.sm --format=csv -lms 5 > $OUT/fast.csv 2>&1 &
smi=$!
sleep 2
./build-gpu/planner validate /tmp/v760.json --hardware $hw --json-out $OUT/v760.json 2>&1 | tee $OUT/v760.log
sleep 1
kill $smi
wc -l $OUT/fast.csv
python3 - $OUT/fast.csv <<'PY'
import csv, sys, datetime
rows = [r for r in csv.reader(open(sys.argv[1]))][1:]
t, inst = [], []
for r in rows:
    try:
        t.append(datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()); inst.append(r[2].strip())
    except Exception:
        pass
gaps = [b - a for a, b in zip(t, t[1:])]
changes = [t[i] for i in range(1, len(inst)) if inst[i] != inst[i - 1]]
cg = [b - a for a, b in zip(changes, changes[1:])]
gaps.sort(); cg.sort()
print("readings", len(t), "median gap %.4f s" % gaps[len(gaps) // 2])
print("instant value changes", len(changes), "median interval between changes %.4f s" % (cg[len(cg) // 2] if cg else -1))
PY

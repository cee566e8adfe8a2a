# Each validate run's clock and power as planner validate's NVML monitor read them (the record's
# measured.gpu_clock, over the run's timed steps) against nvidia-smi's log of the same call
# (clocks-validate.csv, -lms 100) over the timed steps as the timestamped log places them: ending at
# the run's line (printed right after the run) and lasting timed_steps x the measured step time.
# Reads the directory given (default: this script's), every validate-*.json with its .log there.
# Prints nvml-vs-smi.txt.
import datetime as dt
import json
import statistics as st
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)


def stamp(s):
    return dt.datetime.strptime(s, "%Y/%m/%d %H:%M:%S.%f").timestamp()


smi = []
for line in open(here / "clocks-validate.csv"):
    f = [x.strip() for x in line.split(",")]
    if line.startswith("timestamp") or len(f) != 3:
        continue
    smi.append((stamp(f[0]), float(f[1].split()[0]), float(f[2].split()[0])))
print("%-34s %8s %14s %14s %14s %14s" % ("run", "window", "NVML clock", "smi clock", "NVML power", "smi power"))
for path in sorted(here.glob("validate-*.json")):
    name = path.stem
    if not (here / (name + ".log")).exists():
        continue
    runs = json.load(open(path))["runs"]
    # Time-stamped logs only (validate-clocks'), and one-GPU records (a gpu_clock per run).
    lines = [l for l in open(here / (name + ".log")) if l[:2] == "20" and " mb" in l and "|" in l]
    if not lines or "gpu_clock" not in runs[0]["measured"]:
        continue
    for run, line in zip(runs, lines):
        end = stamp(line[:23])
        span = run["measured"]["timed_steps"] * run["measured"]["step_time_s"]
        w = [c for c in smi if end - span <= c[0] <= end]
        g = run["measured"]["gpu_clock"]
        label = "%s %s" % (run["model"], line[24:].split()[1:4])
        print("%-34s %6.2f s %9.0f MHz %9.0f MHz %12.0f W %12.0f W   (%d and %d samples)" % (
            label[:34], span, g["sm_mhz"], st.median(c[1] for c in w), g["power_w"], st.median(c[2] for c in w),
            g["samples"], len(w)))

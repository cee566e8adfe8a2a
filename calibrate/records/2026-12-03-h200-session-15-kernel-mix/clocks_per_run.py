# Each validate run's SM clock and power, read off clocks-validate.csv (nvidia-smi -lms 100) and
# the timestamped validate logs: a run's window runs from the previous run's line (or the command's
# first line) to its own; its clock and power are the medians over the window's second half, past
# the model's set-up and the warm-up steps. Prints clocks-per-run.txt.
import datetime as dt
import statistics as st
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)


def stamp(s):
    return dt.datetime.strptime(s, "%Y/%m/%d %H:%M:%S.%f").timestamp()


clocks = []
for line in open(here / "clocks-validate.csv"):
    f = [x.strip() for x in line.split(",")]
    if line.startswith("timestamp") or len(f) != 3:
        continue
    clocks.append((stamp(f[0]), float(f[1].split()[0]), float(f[2].split()[0])))
print("# each run's window: from the previous run's line (or the command's first line) to its own line; "
      "clock and power over the window's second half")
for log in ("validate-small-gpt-timestamped.log", "validate-llama-one-gpu-timestamped.log"):
    prev = None
    for line in open(here / log):
        ts, rest = stamp(line[:23]), line[24:].rstrip()
        if prev is None:
            prev = ts
            continue
        if " mb" in rest and ("ms" in rest or " s " in rest):
            w = [c for c in clocks if prev + (ts - prev) / 2 <= c[0] <= ts]
            mhz = [c[1] for c in w]
            print("%-44s %5.1f s  SM %4.0f MHz (%4.0f-%4.0f)  %3.0f W  samples %d" % (
                rest[:44], ts - prev, st.median(mhz), min(mhz), max(mhz), st.median([c[2] for c in w]), len(w)))
            prev = ts

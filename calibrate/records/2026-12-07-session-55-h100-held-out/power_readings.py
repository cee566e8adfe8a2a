# How often NVML's power readings change, and what their means over each timed window are, from
# nvidia-smi's fast log (power.draw, the 1 s mean, and power.draw.instant) beside a
# `planner validate` record. From the repository root:
#   python3 calibrate/records/2026-12-07-session-55-h100-held-out/power_readings.py \
#     calibrate/records/2026-12-07-session-55-h100-held-out/call2-fast.csv \
#     calibrate/records/2026-12-07-session-55-h100-held-out/call2-v760.json
import csv
import datetime
import json
import statistics
import sys

samples = []  # (unix time, 1 s mean W, instantaneous W)
for row in list(csv.reader(open(sys.argv[1])))[1:]:
    try:
        t = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
        samples.append((t.timestamp(), float(row[1].split()[0]), float(row[2].split()[0])))
    except (ValueError, IndexError):
        pass
gaps = [b[0] - a[0] for a, b in zip(samples, samples[1:])]
print("%d readings, %.4f s apart at the median" % (len(samples), statistics.median(gaps)))


def change_intervals(col):
    times = [samples[i][0] for i in range(1, len(samples)) if samples[i][col] != samples[i - 1][col]]
    return [b - a for a, b in zip(times, times[1:])]


for col, name in ((1, "power.draw (1 s mean)"), (2, "power.draw.instant")):
    iv = change_intervals(col)
    print("%s: %d changes, %.3f s apart at the median" % (name, len(iv) + 1, statistics.median(iv)))
doc = json.load(open(sys.argv[2]))
for run in doc["runs"]:
    g = run["measured"]["gpu_clock"]
    a, b = g["timed_wall_s"]
    w = [s for s in samples if a <= s[0] <= b]
    values = [w[0][2]] + [w[i][2] for i in range(1, len(w)) if w[i][2] != w[i - 1][2]]
    per_micro_batch = run["measured"]["step_time_s"] * run["layout"]["micro_batch"] / run["global_batch"]
    print("%s mb%d, %.4f s a micro-batch, timed %.2f s: 1 s mean %.0f W (median), instantaneous %.0f W (mean of %d readings); "
          "planner validate's readings: %.0f and %.0f W; the instantaneous values in turn: %s" %
          (run["model"], run["layout"]["micro_batch"], per_micro_batch, b - a, statistics.median(s[1] for s in w),
           statistics.mean(s[2] for s in w), len(w), g["power_w"], g["power_instant_w"],
           " ".join("%.0f" % v for v in values[:16])))

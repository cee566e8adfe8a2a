# A GPT-style layer's element-wise kernels' power at the highest clock, for a profile's
# clock.power_model.memory_bound_w_by_family.gpt, by the rule session 49's power_rule.py reads
# memory_bound_w with off the Llama-style sweeps: the median power (nvidia-smi's power.draw over
# the row) of the share-0 rows, the element-wise group alone, here of `calibrate kernel-mix
# --layer-kind gpt` sweeps, counting only rows that held the highest clock (within one 15 MHz step).
# From the repository root:
#   python3 calibrate/records/2026-12-06-session-53-h200-calibration/gpt_elementwise_power.py 1980 KERNEL-MIX.txt [...]
import json
import re
import statistics
import sys

max_mhz = float(sys.argv[1])
watts = []
for path in sys.argv[2:]:
    gpt = False
    for line in open(path):
        m = re.match(r"# load: .*?; element-wise kernels of a (Llama|GPT)-style layer", line)
        if m:
            gpt = m.group(1) == "GPT"
            continue
        f = line.split()
        if gpt and len(f) > 8 and re.match(r"^[0-9.]+$", f[0]) and float(f[1]) == 0:
            mhz, w = float(f[-3]), float(f[-2])
            if mhz >= max_mhz - 15:
                watts.append(w)
print("share-0 rows of GPT-style layers at the highest clock:", ", ".join("%.0f" % w for w in watts), "W", file=sys.stderr)
print(json.dumps({"gpt": round(statistics.median(watts))}))

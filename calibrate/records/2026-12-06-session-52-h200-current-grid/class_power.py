#!/usr/bin/env python3
"""Each kernel class's power inside the step, from call 2's runs.

usage: class_power.py PROFILE.json PLAIN GEMM ATTENTION [KC.json...]

PLAIN, GEMM, ATTENTION: validate records of the same layouts on the same card (a file, or a folder
of validate-*.json): plain, every GEMM call run n times, every attention forward and backward n
times. From the repository root, call 3's:
  python3 calibrate/records/2026-12-06-session-52-h200-current-grid/class_power.py models/hardware/h100-sxm.json \
    tests/validation/h100-small-gpt-run9.json tests/validation/h100-small-gpt-repeat-gemm.json \
    tests/validation/h100-small-gpt-repeat-attention.json tests/validation/h100-small-gpt-kernel-classes.json
For a layout with step T1 at power P1 and, with class c repeated, T2 at P2 (the mean of NVML's
instantaneous readings over the timed steps), the class's time in the step is (T2 - T1) / (n - 1)
for n calls in place of one (the record's repeated_kernel_class.times) and its power there
(P2 T2 - P1 T1) / (T2 - T1); the rest of the step (element-wise kernels, idle gaps, the
optimizer) draws what is left. KC.json: kernel-class records of the same layouts, for the GEMMs'
FLOPs (the rate the power model reads its GEMM power at). The attention column gives the model's
power below its lowest attention pair (88 TFLOP/s on the H100), where the small GPT's attention runs.
Pairs in which either run fell below the highest clock less 15 MHz are marked: the added time there
is partly the clock's.
"""
import glob, json, os, sys

def runs(path):
    out = {}
    files = sorted(glob.glob(os.path.join(path, "validate-*.json"))) if os.path.isdir(path) else [path]
    for f in files:
        for r in json.load(open(f))["runs"]:
            key = (r["model"], r["layout"]["micro_batch"], r["layout"]["recompute"])
            out[key] = r
    return out

def interp(pairs, x):
    if x <= pairs[0][0]: return pairs[0][1]
    if x >= pairs[-1][0]: return pairs[-1][1]
    for (a, pa), (b, pb) in zip(pairs, pairs[1:]):
        if a <= x <= b: return pa + (pb - pa) * (x - a) / (b - a)

def power(r):
    g = r["measured"]["gpu_clock"]
    return g.get("power_instant_w", g["power_w"]), g["sm_mhz"]

prof = json.load(open(sys.argv[1]))
pm = prof["clock"]["power_model"]
top = prof["clock"]["max_sm_mhz"]
plain, gemm, attn = (runs(p) for p in sys.argv[2:5])
kc = {}
for f in sys.argv[5:]:
    kc.update(runs(f))
print(f"{'step':22} {'T1 ms':>7} {'P1 W':>5} | {'GEMM ms':>8} {'in step W':>9} {'model W':>7} | {'attn ms':>8} {'in step W':>9} {'model W':>7} | {'rest ms':>7} {'W':>5}  clocks")
for key, r in plain.items():
    if key not in gemm or key not in attn: continue
    T1 = r["measured"]["step_time_s"]; P1, f1 = power(r)
    row, clocks, parts = [], [f1], {}
    for name, other in (("gemm", gemm[key]), ("attention", attn[key])):
        T2 = other["measured"]["step_time_s"]; P2, f2 = power(other)
        n = other["repeated_kernel_class"]["times"]
        clocks.append(f2)
        dt = T2 - T1
        parts[name] = (dt / (n - 1), (P2 * T2 - P1 * T1) / dt)
    dtg, pg = parts["gemm"]; dta, pa = parts["attention"]
    rest = T1 - dtg - dta
    po = (P1 * T1 - pg * dtg - pa * dta) / rest
    mg = ma = float("nan")
    if key in kc and "kernel_classes" in kc[key]:
        shapes = kc[key]["kernel_classes"]["gemm_shapes"]
        flops = sum(2 * s["m"] * s["n"] * s["k"] * s["calls_per_step"] for s in shapes)
        mg = interp(pm["gemm_w"], flops / dtg / 1e12)
    ma = interp(pm["attention_w"], 0)  # the model holds attention below its lowest pair
    flag = "" if min(clocks) >= top - 15 else "  (below the highest clock)"
    print(f"{key[0]+' mb'+str(key[1])+' '+key[2]:22} {T1*1e3:7.1f} {P1:5.0f} | {dtg*1e3:8.1f} {pg:9.0f} {mg:7.0f} | {dta*1e3:8.1f} {pa:9.0f} {ma:7.0f} | {rest*1e3:7.1f} {po:5.0f}  {'/'.join('%.0f' % c for c in clocks)}{flag}")
print(f"the model's element-wise power: {pm['memory_bound_w']} W")

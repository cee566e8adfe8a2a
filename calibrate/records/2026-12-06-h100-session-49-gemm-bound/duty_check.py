# A check, not used by the simulator: would pricing each GEMM by the duty it runs at explain the
# by-length errors of the H100's kernel-class records? Run from the repository root:
#   python3 calibrate/records/2026-12-06-h100-session-49-gemm-bound/duty_check.py
# g(x): a bf16 GEMM's time inside a sustained mix in which GEMMs take share x of the time, over its
# time alone: the mean of the two loads of calibrate/records/2026-12-06-h100-session-46-kernel-mix/
# (Llama 2 7B's 4096 x 11008 x 4096 and Llama 3.2 3B's 2048 x 8192 x 3072, shares rising),
# interpolated, held at the ends.
# d: the duty calibrate times a GEMM at, as kernels/gemm_bench.cu times it: a guess of its time at
# 600 TFLOP/s, g_us = 2mnk / 6e8; bursts of inner = max(1, min(50, 300 / g_us)) calls, each
# burst after a device copy of min(512 MiB, max(1 MiB, g_us * inner * 1e-6 * 3.3e12 / 2)) bytes;
# the copy's time at the 2,850 GB/s of read and write traffic the H100 profile's memory_bound
# table gives at 0.8-3.2 GB (so the 512 MiB cap takes about 0.38 ms); the burst's time inner times
# the table's time for the GEMM (the record's predicted_s). d = burst / (burst + copy).
# D: the step's measured GEMM time over its step time.
# Each GEMM priced t * g(D) / g(d(t)) against its time in the step, summed by length, and the step
# error moved by the change in the summed GEMM price.
import glob
import json

G7 = [(0.37, 0.987), (0.53, 1.025), (0.70, 1.100), (0.81, 1.120), (0.90, 1.133), (0.95, 1.149)]
G3 = [(0.26, 0.972), (0.46, 0.989), (0.58, 1.020), (0.70, 1.058), (0.80, 1.082), (0.90, 1.105), (0.95, 1.116)]


def interp(c, x):
    if x <= c[0][0]:
        return c[0][1]
    for (a, fa), (b, fb) in zip(c, c[1:]):
        if x <= b:
            return fa + (fb - fa) * (x - a) / (b - a)
    return c[-1][1]


def g(x):
    return (interp(G7, x) + interp(G3, x)) / 2


def duty(m, n, k, t):
    guess_us = 2.0 * m * n * k / 6e8
    inner = max(1, min(50, int(300.0 / max(1.0, guess_us))))
    copy_bytes = min(512 * 2**20, max(2**20, guess_us * inner * 1e-6 * 3.3e12 / 2))
    copy_s = 2 * copy_bytes / 2850e9
    burst = inner * t
    return burst / (burst + copy_s)


BINS = ["<0.1ms", "0.1-0.3", "0.3-1", ">=1ms"]
for f in sorted(glob.glob("tests/validation/h100-*kernel-classes*.json")):
    for r in json.load(open(f))["runs"]:
        kc, m = r["kernel_classes"], r["measured"]
        gemm = sum(x["measured_s"] * x["calls_per_step"] for x in kc["gemm_shapes"])
        D = gemm / m["step_time_s"]
        bins = {}
        for x in kc["gemm_shapes"]:
            t, n = x["predicted_s"], x["calls_per_step"]
            b = 0 if t < 1e-4 else 1 if t < 3e-4 else 2 if t < 1e-3 else 3
            s = bins.setdefault(b, [0.0, 0.0, 0.0])
            s[0] += x["measured_s"] * n
            s[1] += t * n
            s[2] += t * g(D) / g(duty(x["m"], x["n"], x["k"], t)) * n
        delta = sum(v[2] - v[1] for v in bins.values())
        print("%-45s %-18s mb%d  D %.2f  %s  step %+.2f%% -> %+.2f%%" % (
            f.split("/")[-1], r["model"], r["layout"]["micro_batch"], D,
            "  ".join("%s %+.1f%% -> %+.1f%%" % (BINS[b], 100 * (v[1] / v[0] - 1), 100 * (v[2] / v[0] - 1)) for b, v in sorted(bins.items())),
            100 * r["error"]["step_time"], 100 * (r["error"]["step_time"] + delta / m["step_time_s"])))

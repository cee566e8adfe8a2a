#!/usr/bin/env python3
"""Rate ratios between calibration runs, shape by shape, per table and by size (run from the repo root).

Prints, for each pair (newer run / older run) and each of the bf16 and accumulating tables, the
median ratio of the newer run's TFLOP/s to the older's over the shapes both timed, overall and
for three bands of 2mnk.
"""
import json
import statistics

S38 = "calibrate/records/2026-12-05-h100-session-38-calibrate-validate/"
S47 = "calibrate/records/2026-12-06-h100-session-47-wgrad-accumulate/"
S48 = "calibrate/records/2026-12-06-h100-session-48-token-grid/"
RUNS = {"run1": S38 + "h100-sxm.run1.json", "run2": S38 + "h100-sxm.run2.json", "run3": S47 + "h100-sxm.run3.json",
        "run4": S48 + "h100-sxm.run4.json", "run5": S48 + "h100-sxm.run5.json"}


def table(path):
    out = {}
    for dtype, rows in json.load(open(path))["gpu"]["gemm_tflops"].items():
        if dtype == "columns":
            continue
        for m, n, k, tflops in rows:
            out[(dtype, m, n, k)] = tflops
    return out


tables = {name: table(path) for name, path in RUNS.items()}
for new, old in (("run4", "run3"), ("run5", "run3"), ("run5", "run4")):
    for dtype in ("bf16", "bf16_accumulate_fp32"):
        keys = [k for k in tables[old] if k in tables[new] and k[0] == dtype]
        ratios = [tables[new][k] / tables[old][k] for k in keys]
        line = f"{new}/{old} {dtype:22s} {len(keys):4d} shapes, median {statistics.median(ratios):.3f}"
        for lo, hi in ((0, 1e11), (1e11, 1e12), (1e12, 1e15)):
            band = [tables[new][k] / tables[old][k] for k in keys if lo <= 2 * k[1] * k[2] * k[3] < hi]
            line += f"; 2mnk {lo:.0e}-{hi:.0e}: {statistics.median(band):.3f} ({len(band)})"
        print(line)

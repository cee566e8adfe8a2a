#!/usr/bin/env python3
# The `clock.power_model` block of a profile, read off a part's kernel-mix sweeps by one rule
# (run from the repository root; prints JSON to merge into the profile's block):
#   python3 tools/power_rule.py MAX_MHZ LIMIT_W FILE...
# FILEs: `calibrate kernel-mix` outputs, swept under a power limit of LIMIT_W. Only the rising
# sweeps are read (a sweep whose shares do not rise is a falling one, a repeat of a load already
# read).
# - memory_bound_w: the median power of the share-0 mixes (the element-wise group alone).
# - each load's power alone at full clock: from its largest share that still held MAX_MHZ (where
#   none did, its smallest share above 0, which then reads low), P_alone = (P - (1 - g) P0) / g,
#   P0 that sweep's own share-0 power; keyed by the load's rate alone (TFLOP/s, as kernel-mix
#   prints it; from the GEMM's time alone where the first sweeps print no rate), GEMMs and
#   attention apart; a load swept twice, the mean of the two.
# - the capped rows (below MAX_MHZ) of the GEMM sweeps, each at its estimate
#   E = g P_alone + (1 - g) P0, and the least-squares line through them that passes through
#   (LIMIT_W, MAX_MHZ): a mix whose estimate is at the limit holds the highest clock, one above it
#   a clock lower by a fixed number of MHz per watt over. (The rule before,
#   calibrate/records/2026-12-06-h100-session-49-gemm-bound/power_rule.py, fitted the line freely:
#   at the limit it gave 1,904 MHz on the H100 and 1,871 on the H200, so a step just over the
#   limit was read 76-109 MHz below the highest clock, which such steps hold.)
import json
import re
import statistics
import sys

# `--free-line MAX_MHZ FILE...`: the rule before, the line fitted freely (what the profiles had
# until 2026-12-07; calibrate/records/2026-12-06-h100-session-49-gemm-bound/power_rule.py runs it).
def fail(what):
    print("power_rule.py: error: " + what, file=sys.stderr)
    print("usage: power_rule.py MAX_MHZ LIMIT_W FILE... | power_rule.py --free-line MAX_MHZ FILE...", file=sys.stderr)
    sys.exit(2)


def number(text, name):
    try:
        x = float(text)
    except ValueError:
        fail("%s must be a number, not %r" % (name, text))
    if not x > 0:
        fail("%s must be positive, not %r" % (name, text))
    return x


free_line = len(sys.argv) > 1 and sys.argv[1] == "--free-line"
args = sys.argv[2:] if free_line else sys.argv[1:]
files = args[1:] if free_line else args[2:]
if not files:
    fail("no kernel-mix files given")
max_mhz = number(args[0], "MAX_MHZ")
limit_w = None if free_line else number(args[1], "LIMIT_W")
loads = []
for path in files:
    cur = None
    try:
        text = open(path).read().splitlines(keepends=True)
    except OSError as e:
        fail("cannot read %s: %s" % (path, e.strerror))
    for lineno, line in enumerate(text, 1):
        # The first sweeps (session 15) print "# bf16 GEMM m x n x k;" and the GEMM's time alone.
        m = re.match(r"# (?:load: )?(.*?);", line)
        if m and not line.startswith("# alone") and not line.startswith("# in the mix"):
            cur = {"what": m.group(1), "attention": m.group(1).startswith("causal attention"), "rows": [], "file": path}
            loads.append(cur)
            continue
        m = re.search(r"load [0-9.]+ us \(([0-9.]+) TFLOP/s\)", line)
        if m and cur is not None:
            cur["tflops"] = float(m.group(1))
            continue
        m = re.search(r"alone.*: GEMM ([0-9.]+) us", line)
        g = re.match(r"bf16 GEMM ([0-9]+) x ([0-9]+) x ([0-9]+)", cur["what"]) if cur else None
        if m and g:
            mnk = [float(x) for x in g.groups()]
            cur["tflops"] = round(2 * mnk[0] * mnk[1] * mnk[2] / (float(m.group(1)) * 1e-6) / 1e12)
            continue
        f = line.split()
        if cur is not None and len(f) >= 15 and re.match(r"^[0-9.]+$", f[0]):
            try:
                cur["rows"].append((float(f[1]), float(f[-3]), float(f[-2])))  # share, MHz, W
                cur.setdefault("load", []).append(float(f[5]) if f[5] != "-" else None)  # time in the mix / alone
            except ValueError:
                fail("%s:%d is not a kernel-mix row (target, share, ..., SM MHz, W, samples)" % (path, lineno))

rising = []
for ld in loads:
    shares = [r[0] for r in ld["rows"]]
    if shares == sorted(shares) and len(shares) > 2:
        rising.append(ld)
p0_all = [r[2] for ld in rising for r in ld["rows"] if r[0] == 0]
if not p0_all or any(not any(r[0] == 0 for r in ld["rows"]) or not any(r[0] > 0 for r in ld["rows"]) for ld in rising):
    fail("every rising sweep needs a share-0 row and a row above share 0; found %d rising sweeps" % len(rising))
out = {"memory_bound_w": round(statistics.median(p0_all)), "gemm_w": [], "attention_w": []}
capped = []
for ld in rising:
    p0 = [r[2] for r in ld["rows"] if r[0] == 0][0]
    held = [r for r in ld["rows"] if r[0] > 0 and r[1] >= max_mhz]
    g, mhz, w = max(held) if held else min(r for r in ld["rows"] if r[0] > 0)
    alone = (w - (1 - g) * p0) / g
    ld["alone"] = alone
    (out["attention_w"] if ld["attention"] else out["gemm_w"]).append([ld["tflops"], round(alone)])
    print("%-70s %5.0f TFLOP/s  alone %4.0f W (share %.3f at %4.0f MHz, %3.0f W; P0 %3.0f W)" % (
        ld["what"], ld["tflops"], alone, g, mhz, w, p0), file=sys.stderr)
    if not ld["attention"]:
        for s, mhz, w in ld["rows"]:
            if s > 0 and mhz < max_mhz:
                capped.append((s * alone + (1 - s) * p0, mhz))
# A load swept twice (rising both times) keeps one pair: the mean of the two.
for k in ("gemm_w", "attention_w"):
    by_load = {}
    for ld in rising:
        if ld["attention"] == (k == "attention_w"):
            by_load.setdefault(ld["what"], []).append((ld["tflops"], ld["alone"]))
    out[k] = sorted([round(statistics.mean(r for r, _ in v), 1), round(statistics.mean(w for _, w in v))] for v in by_load.values())
n = len(capped)
if n < 2:
    fail("the GEMM sweeps in these files have %d capped rows (below %.0f MHz); a line needs two" % (n, max_mhz))
if free_line:
    mx = sum(e for e, _ in capped) / n
    my = sum(c for _, c in capped) / n
    b = sum((e - mx) * (c - my) for e, c in capped) / sum((e - mx) ** 2 for e, _ in capped)
    a = my - b * mx
    resid = [c - (a + b * e) for e, c in capped]
    for e, c in sorted(capped):
        print("  capped: estimate %4.0f W  held %4.0f MHz  line %4.0f" % (e, c, a + b * e), file=sys.stderr)
    print("line through %d capped rows: MHz = %.1f %+.4f W (residuals %+.0f..%+.0f MHz)" % (n, a, b, min(resid), max(resid)), file=sys.stderr)
else:
    # Least squares with the line held through (limit_w, max_mhz): MHz - max = b (E - limit).
    b = sum((e - limit_w) * (c - max_mhz) for e, c in capped) / sum((e - limit_w) ** 2 for e, _ in capped)
    a = max_mhz - b * limit_w
    resid = [c - min(max_mhz, a + b * e) for e, c in capped]
    for e, c in sorted(capped):
        print("  capped: estimate %4.0f W  held %4.0f MHz  line %4.0f" % (e, c, min(max_mhz, a + b * e)), file=sys.stderr)
    rms = (sum(r * r for r in resid) / n) ** 0.5
    print("line through %d capped rows and (%.0f W, %.0f MHz): MHz = %.1f %+.4f W (residuals %+.0f..%+.0f MHz, rms %.0f)" % (
        n, limit_w, max_mhz, a, b, min(resid), max(resid), rms), file=sys.stderr)
out["clock_line_mhz"] = [round(a, 1), round(b, 4)]
# Not part of the profile (the simulator prices at the highest clock): how a GEMM's own time
# follows the clock, read off the same sweeps as the element-wise kernels' s is. Each GEMM load's
# time in the mix against its time at the largest share that held MAX_MHZ (where none did, its
# smallest share above 0), at each capped row: s = (ratio - 1) / (MAX_MHZ / f - 1).
sens = []
for ld in rising:
    if ld["attention"]:
        continue
    rows = [(r, x) for r, x in zip(ld["rows"], ld["load"]) if r[0] > 0 and x is not None]
    held = [(r, x) for r, x in rows if r[1] >= max_mhz]
    ref = max(held)[1] if held else min(rows)[1]
    for (s_, mhz, w), x in rows:
        if mhz < max_mhz and max_mhz / mhz - 1 > 0.05:
            sens.append((x / ref - 1) / (max_mhz / mhz - 1))
if sens:
    print("GEMM clock sensitivity over %d capped rows at least 5%% below the highest clock: median %.2f (%.2f..%.2f)" % (
        len(sens), statistics.median(sens), min(sens), max(sens)), file=sys.stderr)
print(json.dumps(out))

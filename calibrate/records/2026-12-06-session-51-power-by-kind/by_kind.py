# Each kind of kernel's power at full clock, read off `calibrate kernel-mix` outputs (run from the
# repository root):
#   python3 calibrate/records/2026-12-06-session-51-power-by-kind/by_kind.py MAX_MHZ kernel-mix.txt
# - the element-wise kernels alone: each layer's share-0 row (tokens, hidden, SwiGLU or MLP width,
#   "gpt" after a GPT-style layer's);
# - a GEMM's or the attention's power alone, from each of its rows that held MAX_MHZ (within one
#   15 MHz step): P_alone = (P - (1 - g) P0) / g, g the load's measured share, P0 the share-0 power
#   of the same layer (the rule of session 49's power_rule.py), with the 1 s mean and the
#   instantaneous readings apart ("-" where a row was capped below MAX_MHZ).
import re
import sys

max_mhz = float(sys.argv[1])
blocks = []
cur = None
for line in open(sys.argv[2]):
    m = re.match(r"# load: (.*?); element-wise kernels of a (Llama|GPT)-style layer at (\d+) tokens, hidden (\d+), (?:SwiGLU|MLP) width (\d+)", line)
    if m:
        kind = "" if m.group(2) == "Llama" else " gpt"
        cur = {"what": m.group(1), "layer": tuple(int(x) for x in m.groups()[2:]) + (kind,), "rows": [], "inst": False}
        blocks.append(cur)
        continue
    m = re.search(r"load [0-9.]+ us \(([0-9.]+) TFLOP/s\)", line)
    if m and cur:
        cur["tflops"] = float(m.group(1))
        continue
    if line.startswith("target") and cur:
        cur["inst"] = "W inst" in line
        continue
    f = line.split()
    if cur and len(f) > 8 and re.match(r"^[0-9.]+$", f[0]):
        inst = float(f[-4]) if cur["inst"] else float("nan")
        cur["rows"].append({"share": float(f[1]), "mhz": float(f[-3]), "w": float(f[-2]), "inst": inst})

p0 = {}
print("element-wise kernels alone (share 0)")
print("%-22s %7s %7s %7s" % ("layer", "SM MHz", "W", "W inst"))
for b in blocks:
    for r in b["rows"]:
        if r["share"] == 0:
            p0.setdefault(b["layer"], []).append((r["w"], r["inst"]))
            print("%-22s %7.0f %7.0f %7.0f" % ("%d,%d,%d%s" % b["layer"], r["mhz"], r["w"], r["inst"]))
print()
print("loads alone at full clock, from their rows that held %.0f MHz" % max_mhz)
print("%-80s %7s %-16s %6s %7s %6s %6s %7s %7s" % ("load", "TFLOP/s", "layer", "share", "SM MHz", "W", "W inst", "alone W", "(inst)"))
for b in blocks:
    if b["layer"] not in p0:
        continue
    w0 = sum(w for w, _ in p0[b["layer"]]) / len(p0[b["layer"]])
    i0 = sum(i for _, i in p0[b["layer"]]) / len(p0[b["layer"]])
    for r in b["rows"]:
        if r["share"] == 0:
            continue
        g = r["share"]
        held = r["mhz"] >= max_mhz - 15
        alone = (r["w"] - (1 - g) * w0) / g if held else None
        alone_i = (r["inst"] - (1 - g) * i0) / g if held else None
        print("%-80s %7.0f %-16s %6.3f %7.0f %6.0f %6.0f %7s %7s" % (
            b["what"][:80], b.get("tflops", 0), "%d,%d,%d%s" % b["layer"], g, r["mhz"], r["w"], r["inst"],
            "%.0f" % alone if alone is not None else "-", "%.0f" % alone_i if alone_i is not None else "-"))

# A first check of a linear power model against the validation steps' measured clocks (not used by
# the simulator). Each step's time shares of GEMMs, attention and other kernels, and its GEMMs'
# mean rate, come from session 10's kernel-timed validate runs (their measured per-class times);
# each class's power alone at 1,980 MHz from this record's kernel-mix runs:
#   GEMM: interpolated in its rate between the four GEMM loads (clamped at the ends; the smallest
#   GEMM's 733 W is the second call's, the third call read 772 W: at most 37% x 39 W = 14 W more
#   for the GPT steps, which stay under the cap);
#   attention: 703 W for 64-wide heads (Llama 1.1B's load), 776 W for 128-wide (Llama 2 7B's);
#   other (element-wise) kernels: 545 W, the middle of the share-0 mixes' 535-553 W.
# The estimate is the time-weighted mean; the cap is 700 W. Prints power-estimate.txt.
import json
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
session10 = here.parent / "2026-12-02-h200-session-10-kernels-in-step"
GEMM_W = [(398, 733), (628, 981), (784, 1034), (809, 1026)]  # (TFLOP/s at 1,980 MHz, W alone)
HEAD_SIZE = {"gpt-125m": 64, "gpt-350m": 64, "llama-1.1b": 64, "llama-3b": 128, "llama2-7b": 128}


def gemm_watts(rate):
    if rate <= GEMM_W[0][0]:
        return GEMM_W[0][1]
    for (r0, w0), (r1, w1) in zip(GEMM_W, GEMM_W[1:]):
        if rate <= r1:
            return w0 + (w1 - w0) * (rate - r0) / (r1 - r0)
    return GEMM_W[-1][1]


print("%-11s %-16s %5s %5s %5s %9s %9s" % ("model", "layout", "GEMM", "attn", "other", "GEMM rate", "estimate"))
for name in ("validate-small-gpt-kernels-in-step.json", "validate-llama-one-gpu-kernels-in-step.json"):
    for r in json.load(open(session10 / name))["runs"]:
        kc = r["kernel_classes"]
        m = kc["measured_s"]
        flop = sum(2.0 * g["m"] * g["n"] * g["k"] * g["calls_per_step"] for g in kc["gemm_shapes"])
        gemm_s = sum(g["measured_s"] * g["calls_per_step"] for g in kc["gemm_shapes"])
        rate = flop / gemm_s / 1e12
        total = m["gemm"] + m["attention"] + m["other"]
        shares = [m["gemm"] / total, m["attention"] / total, m["other"] / total]
        watts = [gemm_watts(rate), 703 if HEAD_SIZE[r["model"]] == 64 else 776, 545]
        estimate = sum(s * w for s, w in zip(shares, watts))
        layout = "mb%d %s" % (r["layout"]["micro_batch"], r["layout"]["recompute"])
        print("%-11s %-16s %4.0f%% %4.0f%% %4.0f%% %5.0f TF/s %7.0f W" % (
            r["model"], layout, 100 * shares[0], 100 * shares[1], 100 * shares[2], rate, estimate))

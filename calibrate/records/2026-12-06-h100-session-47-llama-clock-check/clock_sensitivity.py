#!/usr/bin/env python3
"""The element-wise clock sensitivity s of each part, read off its kernel-mix record.

For every row of a sweep whose median SM clock f is below 1,850 MHz (the power cap holding it):
    s = (k / k0 - 1) / (1980 / f - 1)
k: the Llama layer's element-wise group's summed time in the mix over its sum alone ("kernels");
k0: the same in that sweep's share-0 row (the group alone in the mix, at 1,980 MHz), as the H200
record defines it. s is the median over the rows at 1,500-1,850 MHz, the clocks the capped
training steps held on both parts. Run from the repository root.
"""
import glob
import statistics

RECORDS = {
    "h200-sxm": sorted(glob.glob("calibrate/records/2026-12-03-h200-session-15-kernel-mix/kernel-mix-*.txt")),
    "h100-sxm": ["calibrate/records/2026-12-06-h100-session-46-kernel-mix/kernel-mix.txt"],
}


def points(files):
    out = []
    for name in files:
        k0 = None
        for line in open(name):
            if line.startswith("# load:") or line.startswith("# bf16 GEMM"):
                k0 = None  # a new sweep
            if line.startswith("#") or line.startswith("target"):
                continue
            c = line.split()
            share, k, mhz = float(c[1]), float(c[-4]), float(c[-3])
            if share == 0:
                k0 = k
            elif k0 is not None and mhz < 1850:
                out.append((mhz, (k / k0 - 1) / (1980 / mhz - 1)))
    return out


for part, files in RECORDS.items():
    pts = points(files)
    used = [s for f, s in pts if 1500 <= f < 1850]
    print(f"{part}: {len(pts)} capped rows below 1,850 MHz; {len(used)} at 1,500-1,850 MHz: "
          f"s = {statistics.median(used):.3f} (median; {min(used):.3f}-{max(used):.3f})")
    for f, s in sorted(pts):
        print(f"  {f:6.0f} MHz  s = {s:.3f}{'' if 1500 <= f < 1850 else '  (not used)'}")

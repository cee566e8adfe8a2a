#!/usr/bin/env python3
"""Re-derive README.md's planner output blocks after a change that moves their numbers.

Every README block that starts with `$ build/planner ...` is that command's output, with `...`
standing for lines left out (Cli.ReadmeExamplesAreThePlannersOutput). After a profile or model
change, collect every block's full output before and after the change, then put the new output's
line where each README line matched the old output:

    tools/readme_blocks.py collect /tmp/before.json     # with build/planner and profiles as they were
    (make the change, rebuild)
    tools/readme_blocks.py collect /tmp/after.json
    tools/readme_blocks.py apply /tmp/before.json /tmp/after.json

`apply` rewrites README.md and says which blocks changed length (check those by hand); where a
README line is not in the old output it says so and leaves README.md as it was. Prose that quotes
the numbers is not touched.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "$ build/planner "


def norm(line):
    return re.sub(r"in \d+\.\d+ s", "in _ s", line)


def blocks(lines):
    """(first output line, end, args) of each planner block."""
    i = 0
    while i + 1 < len(lines):
        if lines[i] == "```" and lines[i + 1].startswith(PREFIX):
            j = i + 2
            while j < len(lines) and lines[j] != "```":
                j += 1
            yield i + 2, j, lines[i + 1][len(PREFIX):]
            i = j
        i += 1


def output(args):
    r = subprocess.run(f"cd {ROOT} && build/planner {args}", shell=True, capture_output=True, text=True)
    out = r.stdout.split("\n")
    while out and out[-1] == "":
        out.pop()
    return out


def readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read().split("\n")


def main(argv):
    if len(argv) == 3 and argv[1] == "collect":
        with open(argv[2], "w") as f:
            json.dump({args: output(args) for _, _, args in blocks(readme())}, f)
        return 0
    if len(argv) != 4 or argv[1] != "apply":
        print(__doc__, file=sys.stderr)
        return 2
    old, new = (json.load(open(p)) for p in argv[2:4])
    lines = readme()
    result = list(lines)
    status = 0
    for start, end, args in blocks(lines):
        if args not in old or args not in new:
            print(f"not collected: {args}", file=sys.stderr)
            status = 1
            continue
        o, n = old[args], new[args]
        if len(o) != len(n):
            print(f"output length changed ({len(o)} -> {len(n)} lines), check by hand: {args}", file=sys.stderr)
        a, skipping = 0, False
        for idx in range(start, end):
            line = lines[idx]
            if line == "...":
                skipping = True
                continue
            while skipping and a < len(o) and norm(o[a]) != norm(line):
                a += 1
            skipping = False
            if a >= len(o) or norm(o[a]) != norm(line):
                print(f"README line {idx + 1} is not in the old output of: {args}", file=sys.stderr)
                status = 1
                a += 1
                continue
            if a < len(n) and norm(n[a]) != norm(line):  # a wall time alone is left as it was
                result[idx] = n[a]
            a += 1
    if status:
        print("README.md left as it was", file=sys.stderr)
        return status
    path = os.path.join(ROOT, "README.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(result))
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

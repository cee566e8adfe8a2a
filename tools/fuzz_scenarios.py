#!/usr/bin/env python3
"""Mutation fuzzing of the tools' input: scenarios, hardware profiles and calibration records.

Each case takes one of scenarios/*.json (or, with --target profile, the hardware profile that
scenario names, in a copy of the profiles directory), applies one random mutation (a key removed,
a value of the wrong type or out of range, an unknown key, an array emptied, one column of a whole
table set to an odd value, the text cut short) and runs a planner subcommand on it. The contract (README, "Bad input"): exit 0, or exit 2 with a message on
stderr and no output file written. Anything else is a finding: another exit code, a signal, a
sanitizer report, a run past the time limit, or an output file left by a failed run.

    tools/fuzz_scenarios.py --planner build-asan/planner --cases 300 --seed 1
    tools/fuzz_scenarios.py --planner build-asan/planner --cases 300 --seed 1 --target profile
    tools/fuzz_scenarios.py --calibrate build-asan/calibrate --planner build-asan/planner --cases 300 --seed 1 --target calibration

With --target calibration, the input mutated is one of calibrate's: a recorded calibration run
(`calibrate merge` of it with an intact run), a measured profile (`calibrate refit`, which rewrites
it in place), a kernel-table or attention-table run (`calibrate kernel-table --into` or
`attention-table --into` a copy of the H100's profile) or an nccl-tests log (`calibrate import-nccl-tests`; lines removed, repeated or with a field replaced).
The same contract: exit 0, or exit 2 with a message and nothing written (an output file absent,
a profile rewritten in place left byte for byte as it was); and a profile written with exit 0
must load in the planner (`planner simulate` of the one-GPU validation scenario on it exits 0).

Findings are printed with the mutation and kept as files under --keep (default /tmp/fuzz-findings).
The exit status is the number of findings, capped at 100.
"""
import argparse
import copy
import glob
import json
import os
import random
import subprocess
import sys
import tempfile

ODD_VALUES = [None, True, False, 0, -1, 1, 2**31, 2**63, 2**64, -2**63, 1.5, -0.5, 1e308, -1e308,
              1e-308, 0.0, "", "x", "nan", "inf", "-1", [], [1], {}, {"x": 1}]


def paths(node, prefix=()):
    """Every (path, value) in the document, containers included."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def mutate(doc, text, rng):
    """One mutation: returns (description, new text)."""
    every = [p for p, _ in paths(doc) if p]
    tables = [p for p, v in paths(doc) if isinstance(v, list) and v and all(isinstance(r, list) and r for r in v)
              and len({len(r) for r in v}) == 1]
    kinds = ["delete", "retype", "retype", "retype", "scale", "unknown", "empty", "truncate"]
    kind = rng.choice(kinds + (["column"] * 2 if tables else []))
    doc = copy.deepcopy(doc)
    if kind == "truncate":
        cut = rng.randrange(1, max(2, len(text)))
        return f"text cut at byte {cut}", text[:cut]
    if kind == "column":
        # One column of a whole table (a profile's GEMM rates, say) set to one odd value, so that
        # whichever row the model looks up holds it.
        path = rng.choice(tables)
        rows = get(doc, path)
        j = rng.randrange(len(rows[0]))
        v = rng.choice([0, -1, 0.5, 1e-308, 1e308, 2**63, "x", None])
        for r in rows:
            r[j] = v
        return f"{'/'.join(map(str, path))}[*][{j}] = {json.dumps(v)}", json.dumps(doc, indent=2)
    path = rng.choice(every)
    parent, last = get(doc, path[:-1]), path[-1]
    where = "/".join(map(str, path))
    if kind == "delete":
        if isinstance(parent, dict):
            del parent[last]
        else:
            parent.pop(last)
        what = f"removed {where}"
    elif kind == "retype":
        v = copy.deepcopy(rng.choice(ODD_VALUES))
        parent[last] = v
        what = f"{where} = {json.dumps(v)}"
    elif kind == "scale":
        old = parent[last]
        if isinstance(old, bool) or not isinstance(old, (int, float)):
            v = copy.deepcopy(rng.choice(ODD_VALUES))
        else:
            v = rng.choice([old * 1000, old * 1e9, -old, old / 1000, old + 1, old - 1, 0])
            if isinstance(old, int) and float(v).is_integer() and abs(v) < 2**62:
                v = int(v)
        parent[last] = v
        what = f"{where} = {json.dumps(v)} (was {json.dumps(old)})"
    elif kind == "unknown":
        target = get(doc, path) if isinstance(get(doc, path), dict) else parent
        if not isinstance(target, dict):
            target = doc
        target["unexpected_key"] = 1
        what = f"unknown key beside {where}"
    else:
        v = get(doc, path)
        if isinstance(v, list):
            v.clear()
        elif isinstance(v, dict):
            v.clear()
        else:
            parent[last] = [] if rng.random() < 0.5 else {}
        what = f"{where} emptied"
    return what, json.dumps(doc, indent=2)


def mutate_log(text, rng):
    """One mutation of an nccl-tests text log: returns (description, new text)."""
    lines = text.split("\n")
    kind = rng.choice(["drop", "repeat", "field", "field", "truncate"])
    i = rng.randrange(len(lines))
    if kind == "truncate":
        cut = rng.randrange(1, max(2, len(text)))
        return f"text cut at byte {cut}", text[:cut]
    if kind == "drop":
        return f"line {i + 1} removed", "\n".join(lines[:i] + lines[i + 1:])
    if kind == "repeat":
        return f"line {i + 1} repeated", "\n".join(lines[:i + 1] + lines[i:])
    fields = lines[i].split()
    if not fields:
        return f"line {i + 1} left as it was (blank)", text
    j = rng.randrange(len(fields))
    v = rng.choice(["0", "-1", "nan", "inf", "1e308", "x", "N/A", "99999999999999999999", ""])
    fields[j] = v
    lines[i] = " ".join(fields)
    return f"line {i + 1} field {j + 1} = {json.dumps(v)}", "\n".join(lines)


def calibration_case(a, rng, tmp, case):
    """A mutated calibrate input and the command that reads it: (what, mutated text, source file,
    argv, files that must not exist after exit 2, {file: text it must keep after exit 2}, the
    profile it writes or None)."""
    runs = sorted(glob.glob(os.path.join(a.records, "h200-runs", "*.json")))
    job = rng.choice(["merge", "refit", "kernel-table", "attention-table", "import-nccl-tests"])
    out = os.path.join(tmp, f"out-{case}.json")
    if job == "merge":
        src, intact = rng.sample(runs, 2)
        text = open(src).read()
        what, mutated = mutate(json.loads(text), text, rng)
        target = os.path.join(tmp, os.path.basename(src))
        open(target, "w").write(mutated)
        return what, mutated, src, [a.calibrate, "merge", intact, target, "--name", "fuzz", "--out", out], [out], {}, out
    if job == "refit":
        src = os.path.join(a.profiles, rng.choice(["h200-sxm.json", "h100-sxm.json", "h200-socket-loopback.json"]))
        text = open(src).read()
        what, mutated = mutate(json.loads(text), text, rng)
        target = os.path.join(tmp, os.path.basename(src))
        open(target, "w").write(mutated)
        return what, mutated, src, [a.calibrate, "refit", target], [], {target: mutated}, target
    if job in ("kernel-table", "attention-table"):
        runs = {"kernel-table": os.path.join("2026-12-07-session-60-kernel-timing", "call1", "kernel-run-*.json"),
                "attention-table": os.path.join("2026-12-07-session-58-attention-table", "h100-sxm-*run*.json")}
        src = rng.choice(sorted(glob.glob(os.path.join(a.records, runs[job]))))
        text = open(src).read()
        what, mutated = mutate(json.loads(text), text, rng)
        run = os.path.join(tmp, os.path.basename(src))
        open(run, "w").write(mutated)
        profile = os.path.join(tmp, "h100-sxm.json")
        kept = open(os.path.join(a.profiles, "h100-sxm.json")).read()
        open(profile, "w").write(kept)
        return what, mutated, src, [a.calibrate, job, "--into", profile, run], [], {profile: kept}, profile
    src = rng.choice(sorted(glob.glob(os.path.join(a.records, "imported", "*.txt"))))
    what, mutated = mutate_log(open(src).read(), rng)
    log = os.path.join(tmp, os.path.basename(src))
    open(log, "w").write(mutated)
    return what, mutated, src, [a.calibrate, "import-nccl-tests", log, "--out", out], [out], {}, None


def profile_load_problem(a, tmp, profile, env):
    """Why the planner does not take `profile` (a path), or None: it simulates the one-GPU
    validation scenario with the scenario's hardware set to that file."""
    scen = json.load(open(os.path.join(os.path.dirname(a.scenarios), "validate-one-gpu.json")))
    scen["hardware"] = os.path.abspath(profile)
    path = os.path.join(tmp, "on-written-profile.json")
    open(path, "w").write(json.dumps(scen))
    try:
        p = subprocess.run([a.planner, "--profiles", a.profiles, "simulate", path], capture_output=True,
                           text=True, timeout=a.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "the profile written: planner simulate ran past the time limit"
    if p.returncode != 0 or "runtime error:" in p.stderr or "Sanitizer" in p.stderr:
        return f"the profile written does not load: planner simulate exit {p.returncode}: {p.stderr.strip()[-300:]}"
    return None


COMMANDS = {
    "simulate": lambda f, out: ["simulate", f, "--json", "--trace", out],
    "simulate-full": lambda f, out: ["simulate", f, "--mode", "full", "--trace", out],
    "sweep": lambda f, out: ["sweep", f, "--json"],
    "search": lambda f, out: ["search", f, "--top", "3"],
    "report": lambda f, out: ["report", f, "--output", out, "--top", "3"],
    "what-if": lambda f, out: ["what-if", f, "--json"],
    "export": lambda f, out: ["export", f],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--planner", default="build-asan/planner")
    ap.add_argument("--calibrate", default="build-asan/calibrate", help="with --target calibration")
    ap.add_argument("--records", default="calibrate/records", help="with --target calibration")
    ap.add_argument("--profiles", default="models/hardware")
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--commands", default="simulate,sweep,search,report,what-if,export")
    ap.add_argument("--scenarios", default="scenarios/*.json")
    ap.add_argument("--keep", default="/tmp/fuzz-findings")
    ap.add_argument("--target", choices=["scenario", "profile", "calibration"], default="scenario")
    ap.add_argument("--verbose", action="store_true", help="print every case's mutation and message")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    files = sorted(f for f in glob.glob(a.scenarios) if "validate" not in os.path.basename(f))
    commands = a.commands.split(",")
    os.makedirs(a.keep, exist_ok=True)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    findings = 0
    counts = {}
    with tempfile.TemporaryDirectory() as tmp:
        profiles = a.profiles
        if a.target == "profile":
            profiles = os.path.join(tmp, "profiles")
            subprocess.run(["cp", "-r", a.profiles, profiles], check=True)
        for case in range(a.cases):
            src = rng.choice(files)
            cmd = rng.choice(commands)
            out = os.path.join(tmp, "out-" + str(case))
            absent, unchanged, written = [out], {}, None
            if a.target == "calibration":
                what, mutated, src, argv, absent, unchanged, written = calibration_case(a, rng, tmp, case)
                cmd = argv[1]
            elif a.target == "scenario":
                text = open(src).read()
                what, mutated = mutate(json.loads(text), text, rng)
                # The mutated scenario keeps the original's name so that messages name a file.
                scen = os.path.join(tmp, os.path.basename(src))
                open(scen, "w").write(mutated)
            else:
                scen = src
                name = json.load(open(src))["hardware"]
                target = os.path.join(profiles, name + ".json")
                text = open(os.path.join(a.profiles, name + ".json")).read()
                what, mutated = mutate(json.loads(text), text, rng)
                what = f"{name}.json: {what}"
                # Every other profile as committed, this one mutated.
                subprocess.run(["rm", "-rf", profiles], check=True)
                subprocess.run(["cp", "-r", a.profiles, profiles], check=True)
                open(target, "w").write(mutated)
            if a.target != "calibration":
                argv = [a.planner, "--profiles", profiles] + COMMANDS[cmd](scen, out)
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=a.timeout, env=env)
                rc, err = p.returncode, p.stderr
            except subprocess.TimeoutExpired:
                rc, err = "timeout", ""
            counts[rc] = counts.get(rc, 0) + 1
            problem = None
            if rc not in (0, 2):
                problem = f"exit {rc}"
            elif "runtime error:" in err or "AddressSanitizer" in err or "LeakSanitizer" in err:
                problem = "sanitizer report"
            elif rc == 2 and any(os.path.exists(f) for f in absent):
                problem = "output left by a failed run"
            elif rc == 2 and any(open(f).read() != t for f, t in unchanged.items()):
                problem = "a file rewritten by a failed run"
            elif rc == 2 and not err.strip():
                problem = "exit 2 without a message"
            elif rc == 0 and written:
                problem = profile_load_problem(a, tmp, written, env)
            if a.verbose:
                print(f"case {case}: {cmd} {os.path.basename(src)}: {what} -> {rc}: {err.strip()[:300]}")
            if problem:
                findings += 1
                keep = os.path.join(a.keep, f"case{case}-{os.path.basename(src)}")
                open(keep, "w").write(mutated)
                print(f"FINDING case {case}: {problem}: {cmd} on {os.path.basename(src)}, {what}\n"
                      f"  kept as {keep}\n  stderr: {err.strip()[-600:]}", flush=True)
            subprocess.run(["rm", "-rf", out] + absent)
    print(f"{a.cases} cases, exit codes {counts}, {findings} findings")
    return min(findings, 100)


if __name__ == "__main__":
    sys.exit(main())

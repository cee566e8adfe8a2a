#!/usr/bin/env python3
"""Reads call N's nvidia-smi log (clocks.csv: SM clock, power, temperatures, 100 ms) against the
timed windows planner validate recorded (gpu_clock.timed_wall_s of each run in the JSON records
given), and prints each run's medians and, for runs timed longer than 20 s, the same in 10 s bins:
whether a step near the power limit holds its clock and power as the card warms.

usage: sustained.py clocks.csv record.json [record.json ...]
"""
import calendar, json, statistics, sys, time


def read_log(path):
    rows, cols = [], None
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if cols is None:
            cols = f
            continue
        if len(f) != len(cols):
            continue
        t = calendar.timegm(time.strptime(f[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + f[0].split(".")[1])
        vals = {}
        for name, v in zip(cols[1:], f[1:]):
            try:
                vals[name] = float(v.split()[0])
            except ValueError:
                vals[name] = v
        rows.append((t, vals))
    return cols, rows


def window(rows, t0, t1, key):
    v = [r[1][key] for r in rows if t0 <= r[0] <= t1 and isinstance(r[1].get(key), float)]
    return statistics.median(v) if v else float("nan")


def main():
    cols, rows = read_log(sys.argv[1])
    keys = [c for c in cols[1:] if not c.startswith("clocks_event")]
    cap = next((c for c in cols if "sw_power_cap" in c), None)
    short = {"clocks.current.sm [MHz]": "MHz", "power.draw [W]": "W", "power.draw.instant [W]": "W inst",
             "temperature.gpu": "GPU C", "temperature.memory": "HBM C"}
    print("record / run".ljust(44) + "".join(short.get(k, k).rjust(9) for k in keys) + ("  capped" if cap else "") + "   timed s  step ms")
    for rec in sys.argv[2:]:
        doc = json.load(open(rec))
        for run in doc["runs"]:
            m = run["measured"]
            t0, t1 = m["gpu_clock"]["timed_wall_s"]
            name = f"{rec.split('/')[-1][:-5]}: {run['model']} mb{run['layout']['micro_batch']}"
            def line(label, a, b):
                s = label.ljust(44) + "".join(f"{window(rows, a, b, k):9.0f}" for k in keys)
                if cap:
                    v = [r[1][cap] for r in rows if a <= r[0] <= b]
                    s += f"  {sum(1 for x in v if x == 'Active') / max(1, len(v)):6.2f}"
                return s
            print(line(name, t0, t1) + f"  {t1 - t0:8.1f}  {m['step_time_s'] * 1e3:7.1f}")
            if t1 - t0 > 20:
                a = t0
                while a < t1 - 1:
                    print(line(f"   {a - t0:5.0f}-{min(a + 10, t1) - t0:3.0f} s", a, min(a + 10, t1)))
                    a += 10


if __name__ == "__main__":
    main()

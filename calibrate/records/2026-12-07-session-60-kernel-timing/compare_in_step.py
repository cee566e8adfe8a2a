#!/usr/bin/env python3
"""Each step kernel's time inside the GPT steps (a TRAINSIM_TIME_KERNEL_CLASSES validation record)
against calibrate kernel-conditions' six timings at the same shape, on the same card.

usage: compare_in_step.py KERNEL-CONDITIONS.txt VALIDATION.json
Per kernel and step: the in-step time of one call (its measured time over its calls a step), the
profile's price against it (pred), and each timing's reading against it; then the medians.
"gelu ip" is the GeLU backward timed in place (as the step calls it) against the same in-step time.
"""
import json
import statistics
import sys

COLS = ['burst', 'single', 'evicted', 'afterFMA', 'load', 'full']
HIDDEN = {'gpt-125m': 768, 'gpt-350m': 1024, 'gpt-760m': 1536, 'gpt-1.3b': 2048, 'gpt-2.7b': 2560, 'gpt-6.7b': 4096}


def read_conditions(path):
    cond = {}
    for line in open(path):
        p = line.split()
        if len(p) < 9 or not p[-1].endswith('us'):
            continue
        try:
            tokens, hidden = int(p[-8]), int(p[-7])
        except ValueError:
            continue
        cond[(' '.join(p[:-8]), tokens, hidden)] = [float(x[:-2]) for x in p[-6:]]
    return cond


def main():
    cond = read_conditions(sys.argv[1])
    record = json.load(open(sys.argv[2]))
    rows = {}
    for run in record['runs']:
        hidden = HIDDEN.get(run['model'])
        if hidden is None:
            continue
        tokens = run['layout']['micro_batch'] * 2048
        for k in run['kernel_classes']['kernels']:
            per = k['measured_s'] / k['calls_per_step'] * 1e6
            pred = k['predicted_s'] / k['calls_per_step'] * 1e6
            key = (k['kernel'], tokens, hidden)
            if key in cond:
                rows.setdefault(k['kernel'], []).append((tokens, hidden, per, pred, cond[key]))
            ip = ('gelu_bias.bwd in place', tokens, hidden)
            if k['kernel'] == 'gelu_bias.bwd' and ip in cond:
                rows.setdefault('gelu ip', []).append((tokens, hidden, per, pred, cond[ip]))
    for name, rs in rows.items():
        print(name)
        for tokens, hidden, per, pred, c in rs:
            print(f"  {tokens:6d} {hidden:5d} instep {per:8.2f} pred {pred / per - 1:+6.1%} " +
                  ' '.join(f"{COLS[i]} {c[i] / per - 1:+6.1%}" for i in range(6)))
        med = [statistics.median([c[i] / per - 1 for _, _, per, _, c in rs]) for i in range(6)]
        print('  median', ' '.join(f"{COLS[i]} {med[i]:+6.1%}" for i in range(6)),
              f"pred {statistics.median([pred / per - 1 for _, _, per, pred, _ in rs]):+6.1%}")


if __name__ == '__main__':
    main()

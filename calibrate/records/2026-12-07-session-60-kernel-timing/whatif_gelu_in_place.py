#!/usr/bin/env python3
"""What the held-out H100 runs would read if the profile priced the GeLU backward as the runner
calls it (in place): each of the profile's gelu_bias.bwd rows slowed by this card's in-place over
out-of-place ratio at its shape (calibrate kernel-conditions, burst column). A what-if, not a
profile to commit.

usage: whatif_gelu_in_place.py PROFILE.json KERNEL-CONDITIONS.txt   (rewrites PROFILE.json)
then:  build/unit_tests --gtest_filter='Validation.*' | grep 'H100 runs'   and restore the profile.
"""
import json
import sys

profile_path, conditions_path = sys.argv[1], sys.argv[2]
burst = {}
for line in open(conditions_path):
    if line.startswith('gelu_bias.bwd'):
        p = line.split()
        burst[('in place' in line, int(p[-8]), int(p[-7]))] = float(p[-6][:-2])
profile = json.load(open(profile_path))
rows = profile['gpu']['memory_kernels']['gelu_bias.bwd']
samples = [s for s in profile['measurements']['step_kernels'] if s['kernel'] == 'gelu_bias.bwd' and not s['llama']]
assert len(samples) == len(rows), 'the rows are the recorded samples, in order'
for row, s in zip(rows, samples):
    ratio = burst[(True, s['tokens'], s['hidden'])] / burst[(False, s['tokens'], s['hidden'])]
    row[1] /= ratio  # GB/s
    print(f"{s['tokens']:6d} x {s['hidden']:5d}: in place / out of place {ratio:.3f}")
json.dump(profile, open(profile_path, 'w'), indent=1)

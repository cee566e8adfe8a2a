# The `power` block's clock model of a profile as this session's rule read it off a part's
# kernel-mix sweeps, the clock line fitted freely (run from the repository root):
#   python3 calibrate/records/2026-12-06-h100-session-49-gemm-bound/power_rule.py MAX_MHZ FILE...
# The rule's code now lives in tools/power_rule.py, which since 2026-12-07 holds the line through
# the highest clock at the power limit; this runs it with `--free-line`, which gives this
# script's output as first committed here, byte for byte.
import os
import subprocess
import sys

tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "power_rule.py")
sys.exit(subprocess.call([sys.executable, tool, "--free-line"] + sys.argv[1:]))

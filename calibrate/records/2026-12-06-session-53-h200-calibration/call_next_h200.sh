#!/usr/bin/env bash
# Prepared in session 53 for the next H200, not run: the six-run h200-sxm held against a card it
# was not calibrated on, and GPT's element-wise kernels swept alone on that second card. Session
# 54's call3.sh does the same on either part (it picks the profile from the card), so this runs it.
exec bash calibrate/records/2026-12-06-session-54-h100-gpt-power/call3.sh "$@"

#!/usr/bin/env bash
# Session 58, a third call: call.sh (this card's attention table into $OUT/attention-run.json;
# where runs of this part are committed beside it, those written into this machine's copy of the
# profile and the GPT scenarios validated with it), its validation files packed into val.tgz so
# that they all come back.
set -u
bash calibrate/records/2026-12-07-session-58-attention-table/call.sh
rc=$?
[ -d $OUT/val ] && (cd $OUT && tar czf /tmp/val.tgz val && rm -rf val && mv /tmp/val.tgz .)
exit $rc

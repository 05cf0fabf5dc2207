#!/bin/bash
# Session 115: device-call-a.sh then device-call-b.sh in one call, parts that would start
# past 520 s skipped (listed in skipped.txt) for a later call.
export DEADLINE=$(( $(date +%s) + 520 ))
bash results/2026-12-05-session115/device-call-a.sh
bash results/2026-12-05-session115/device-call-b.sh

#!/bin/bash
# Session 136, call 3 (device time nearly spent): call 2's MiniMax-M2 failures were
# transformers 5.17 rotating whole heads where the tiny preset gave rotary_dim (5.25
# reads it as half the head); the preset now gives partial_rotary_factor, which both read.
# The two new families' GPU tests again, then the probe at 1 and 8 rows (call 2's broke on
# its layer's missing choice bias).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
START=$(date +%s)
PYTHONPATH=src timeout 130 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py -k "minimax or solar" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=src timeout 60 python3 -u research/probe_experts.py --rows 1,8 > $OUT/2-probe.txt 2>&1
echo "probe rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
true

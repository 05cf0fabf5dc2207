#!/bin/bash
# Session 134, call 2: device-call-1.sh cut to what session 134's device time left (twelve
# starts failed): the MoE kernel tests and the new families' (GPT-OSS, Granite MoE shared
# and SWA) through transformers and the graphs; the probe's layouts at 8-32 rows on OLMoE's
# and Qwen3-30B-A3B's shapes with this tree's by-expert kernels, and at 16 rows with
# session 133's (baseline/src).
set -u
START=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
PYTHONPATH=src timeout 100 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or granitemoe or gpt-oss or olmoe" > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=src timeout 100 python3 -u research/probe_experts.py --rows 8,16,32 --layouts \
  --shapes olmoe,qwen3-30b-a3b > $OUT/2-probe-new.txt 2>&1
echo "probe new rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=baseline/src timeout 40 python3 -u research/probe_experts.py --rows 16 --layouts \
  --shapes olmoe,qwen3-30b-a3b > $OUT/3-probe-old.txt 2>&1
echo "probe old rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
true

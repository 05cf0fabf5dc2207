#!/bin/bash
# Session 136, call 1: session 135's last change (the by-expert down's block for tiles of
# up to 16 rows, 16x512 -> 32x128) had passed only the probe's check on a GPU. Here: the
# MoE GPU tests with it as the default, the probe's layouts at 2-32 rows, then whole steps
# of OLMoE at batch 8 and 16 and Qwen1.5-MoE-A2.7B (no issue names it) at batch 4.
set -u
export TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-570} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
PYTHONPATH=src timeout 170 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or mixtral or qwen2-moe or qwen3-moe or olmoe or granitemoe or gpt-oss" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=src timeout 170 python3 -u research/probe_experts.py --rows 2,4,8,16,32 --layouts \
  > $OUT/2-probe.txt 2>&1
echo "probe rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
export PYTHONPATH=src
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  if [ $(left) -lt $limit ]; then limit=$(left); fi
  if [ $limit -lt 40 ]; then echo "$name skipped ($(left) s left)" >> $OUT/0-log.txt; return; fi
  echo "=== $name: $*" >> $OUT/demos.txt
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" \
    >> $OUT/demos.txt 2>&1
  echo "$name rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
  tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null   # (kept if a later step is cut off)
}
demo olmoe-b8-16 150 --model olmoe-1b-7b --batch 8,16 --variants tilegraph
demo qwen15moe-b4 120 --model qwen1.5-moe-a2.7b --batch 4 --variants tilegraph
true

#!/bin/bash
# Session 133, call 1. Session 132's expert kernels' block rule never ran on a GPU, and this
# session adds the by-expert kernels (kernels/_experts_by_expert.py) for steps of 2+ rows:
# the MoE tests (kernels in both layouts against float64, graphs against eager, the MoE
# families against transformers and through the Generator); the probe of both layouts and
# the by-expert block shapes at 1-32 rows for OLMoE's, Qwen3-30B-A3B's and Mixtral's shapes
# (session 132, old rule, one row: 62.3% / 50.1% / 81.6% of copy; Mixtral 8 rows 45.3%,
# the plain path 69.8%); OLMoE 1B-7B's shape at batch 1 and 8 (session 132, old rule:
# 1.300 ms, 60.9% of the floor; 5.273 ms, 59.5%); Qwen1.5-MoE-A2.7B's at batch 1.
# GUARD (default 575 s) skips what would pass the limit.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-575} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
timeout 170 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or mixtral or qwen2-moe or qwen3-moe or olmoe or granitemoe" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
timeout 220 python3 research/probe_experts.py --rows 1,2,4,8,16,32 --layouts \
  > $OUT/2-probe.txt 2>&1
echo "probe rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
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
demo olmoe-b8 110 --model olmoe-1b-7b --batch 8 --variants tilegraph
demo olmoe-b1 100 --model olmoe-1b-7b --batch 1 --variants tilegraph
demo qwen15moe-b1 120 --model qwen1.5-moe-a2.7b --batch 1 --variants tilegraph
true

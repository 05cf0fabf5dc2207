#!/bin/bash
# Session 133, call 3: the layout rule (by expert where a step's rows are expected to take
# each expert twice or more, else the pair kernels; the by-expert blocks by tile rows), as
# the last check: the MoE tests, the probe's default path against the plain one at 4, 8 and
# 32 rows (call 2's layouts: the rule's picks), OLMoE 1B-7B at batch 8 (call 2, by expert
# at 8 rows: 5.218 ms, 60.4% of the floor) and batch 1 (call 1: 1.194 ms, 66.3%).
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-300} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
timeout 110 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or mixtral or qwen2-moe or qwen3-moe or olmoe or granitemoe" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
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
demo olmoe-b1 50 --model olmoe-1b-7b --batch 1 --variants tilegraph
if [ $(left) -gt 30 ]; then
  timeout $(left) python3 -u research/probe_experts.py --rows 4,8,32 > $OUT/2-probe.txt 2>&1
  echo "probe rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
fi
true

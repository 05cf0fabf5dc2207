#!/bin/bash
# Session 133, call 2. The pair kernels' grids now run a block's pairs side by side (the
# pair index fastest), so rows taking the same expert read its block at about the same
# time, from L2 after the first; the by-expert kernels' blocks are call 1's best (gate/up
# 32 x 64, down 16 x 256). The MoE tests; the probe of both layouts at 1-32 rows (call 1:
# pairs, block-major grids, 1 row 70.0 / 60.8 / 95.3% of copy; 8 rows 64.9 / 74.9 / 38.6%);
# the demos of OLMoE 1B-7B at batch 1 (call 1: 1.194 ms, 66.3% of the floor) and
# Qwen1.5-MoE-A2.7B at batch 1 (call 1: out of memory in the fp32 reference's deep copy,
# now upcast in place), then OLMoE at batch 8 while GUARD (default 480 s) allows.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-480} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
timeout 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or mixtral or qwen2-moe or qwen3-moe or olmoe or granitemoe" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
timeout 190 python3 -u research/probe_experts.py --rows 1,2,4,8,16,32 --layouts \
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
demo olmoe-b1 60 --model olmoe-1b-7b --batch 1 --variants tilegraph
demo qwen15moe-b1 120 --model qwen1.5-moe-a2.7b --batch 1 --variants tilegraph
demo olmoe-b8 200 --model olmoe-1b-7b --batch 8 --variants tilegraph
true

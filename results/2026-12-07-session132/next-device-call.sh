#!/bin/bash
# For session 133: what session 132 could not run (its device time ran out after two
# calls). The expert kernels' block rule of session 132's call 2 (small tiles, many
# programs; its tile shapes were timed there through research/probe_experts.py --blocks,
# but the rule itself never ran on a GPU): the MoE tests (the kernels, tiny Mixtral, Qwen 2
# MoE with its shared expert, Qwen 3 MoE, OLMoE and Granite MoE through the kernels against
# transformers and through the Generator's graphs); the probe at 1 and 8 rows (call 2, the
# old rule: 62.3% / 50.1% / 81.6% of copy at one row); OLMoE 1B-7B's shape at batch 1 and 8
# (call 1, the old rule: 1.300 ms, 60.9% of the floor; 5.273 ms, 59.5%); Qwen1.5-MoE-A2.7B's
# at batch 1 (a shared expert). GUARD (default 575 s) skips what would pass the limit.
# Not here: the MoE families under tensor parallelism on GPUs (CPU only so far), on a
# two-GPU machine: `PYTHONPATH=src python3 -m pytest -q tests/test_tensor_parallel.py -k
# families`, then Mixtral 8x7B's shape at tp=2.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-575} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
timeout 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or mixtral or qwen2-moe or qwen3-moe or olmoe or granitemoe" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
timeout 90 python3 research/probe_experts.py --rows 1,8 > $OUT/2-probe.txt 2>&1
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
demo olmoe-b1 100 --model olmoe-1b-7b --batch 1 --variants tilegraph
demo olmoe-b8 110 --model olmoe-1b-7b --batch 8 --variants tilegraph
demo qwen15moe-b1 120 --model qwen1.5-moe-a2.7b --batch 1 --variants tilegraph
true

#!/bin/bash
# For the session after 134 (whose device starts all failed, then were paused), on this
# branch (by-expert-routes) with session 133's tree beside it, made before the call:
#     mkdir -p baseline && git archive 64fe2a4 src | tar -x -C baseline
# The by-expert kernels routed once a step (route_kernel: one program
# routes every row, lists the experts taken; gate/up's programs run on those only; down
# walks the taken experts, not all, its blocks split along the inner width to 4 programs an
# SM, the parts summed in order by a kernel of their own) against session 133's (each
# gate/up program routed every row, down scanned every expert, a program a block): the
# probe's layouts on both (the old from baseline/src: session 133's tree), at 2-32 rows.
# First the MoE tests, with session 133's new families (GPT-OSS,
# Granite MoE shared and SWA, the experts' biases: CPU only so far); then OLMoE 1B-7B's
# whole step at batch 1 and 8 and Qwen2-0.5B at batch 1 (issue 20: 60% of the floor;
# 62.1% on an H100 in session 123, 49.3% on an H200 in session 108) if time is left.
set -u
export TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-575} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
PYTHONPATH=src timeout 170 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or mixtral or qwen2-moe or qwen3-moe or olmoe or granitemoe or gpt-oss" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=src timeout 200 python3 -u research/probe_experts.py --rows 2,4,8,16,32 --layouts \
  > $OUT/2-probe-new.txt 2>&1
echo "probe new rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=baseline/src timeout 90 python3 -u research/probe_experts.py --rows 4,16 \
  --layouts > $OUT/3-probe-old.txt 2>&1
echo "probe old rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
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
demo olmoe-b1 90 --model olmoe-1b-7b --batch 1 --variants tilegraph
demo qwen2-b1 70 --model qwen2-0.5b --batch 1 --variants tilegraph
demo olmoe-b8 180 --model olmoe-1b-7b --batch 8 --variants tilegraph
true

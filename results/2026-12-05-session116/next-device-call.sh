#!/bin/bash
# Written in session 116 for the next device call (about eight minutes; run with timeout 590):
# what its call did not reach. Each part writes its own file into $OUT as it ends (at most 8
# come back), and none starts after 500 s (listed in skipped.txt).
#   1. the LongRoPE tests after their fix (transformers 5.17's past_key_values);
#   2. research/probe_plain_chain.py: plain tg.linear chains captured PyTorch's way, now that
#      such a capture takes the spare workspace (session 111 timed them unsplit: fp32 8 rows,
#      1280^2 12.4 us a link, 1536^2 17.8);
#   3. Phi-3-mini's demo at batch 1 (a cold build of batch 8 would not fit beside it), against transformers eager and the hand graph;
#   4. OpenLLaMA-3B's shape (heads of 100, no GQA; session 111's config) if time is left.
set -u
DEADLINE=$(( $(date +%s) + 500 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S111=results/2026-12-04-session111
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
demo() {  # file, timeout, demo arguments
  local file=$1 limit=$2; shift 2
  { echo "\$ tilegraph demo $*"
    COLUMNS=200 run timeout $limit python3 -m tilegraph demo "$@" --out /tmp/demo-$file | tail -25
    echo "rc=${PIPESTATUS[0]}"; } > $OUT/$file.txt 2>&1
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
left longrope && (run timeout 90 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_llama.py tests/test_generate.py -k longrope; echo "rc=$?") > $OUT/1-longrope.txt 2>&1
left chain && (run timeout 120 python3 research/probe_plain_chain.py --shapes 1280x1280,1536x1536,2048x2048 --rows 8; echo "rc=$?") > $OUT/2-chain.txt 2>&1
left phi3 && demo 3-phi3-mini 200 --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps
left openllama && demo 4-openllama 150 --model $S111/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256
true

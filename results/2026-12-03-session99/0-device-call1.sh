# Written in session 98 for the next session, not run: about 8 minutes. On the tree with the
# contiguous split-K partials (b049eaf):
# 1. the one GPU test session 98 did not reach;
# 2. issue 17's bf16 grid a second time (session 98 read 1.303x in one run; 1.3x asked);
# 3. the batch-1 demos of issue 20 on this tree.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-gpu-test-tune 120 python3 -m pytest -m gpu -q tests/test_decode_plan.py -k test_tune_keeps_a_correct_plan_and_refuses_capture
t 2-decode-grid-bf16 270 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/grid2 --format md,json
t 3-demo-tinyllama-b1 90 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo3
t 4-demo-qwen-b1 90 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo4
tar czf $OUT/extra.tgz -C /tmp grid2 demo3 demo4 2>/dev/null

# Session 94, call 2: the GPU tests of tests/test_decode_plan.py that call 1's limit cut
# (its first two ran), the batch-8 TinyLlama demo with room for its cold build, and the
# off-list projections in fp16 at the row counts the grid skips.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 4-gpu-tests-plan 200 python3 -m pytest -m gpu -q tests/test_decode_plan.py
t 5-demo-tinyllama-b8 260 python3 -m tilegraph demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps --out /tmp/demo5
t 6-offlist-fp16 100 python3 research/probe_offlist_grid.py --dtype fp16 --rows 3,6,12 --shapes 896x4864,1536x8960,3072x2048,3000x1000,2048x8192
tar czf $OUT/extra.tgz -C /tmp demo5 2>/dev/null

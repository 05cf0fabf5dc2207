# Session 94, call 1: session 93's pending check (every GPU test of the kernels the even
# split-K deal touches, then a batch-8 TinyLlama demo), and the off-list projections at the
# row counts the grid skips, where the even deal is now the 16-bit default.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-gpu-tests-dot 330 python3 -m pytest -m gpu -q tests/test_linear.py tests/test_linear_qkv.py tests/test_decode_plan.py
t 2-demo-tinyllama-b8 110 python3 -m tilegraph demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps --out /tmp/demo2
t 3-offlist-bf16 120 python3 research/probe_offlist_grid.py --dtype bf16 --rows 3,6,12 --shapes 1152x896,896x896,896x4864,1536x8960,3072x2048,3000x1000,2048x8192
tar czf $OUT/extra.tgz -C /tmp demo2 2>/dev/null

# Written in session 93, not run (its device time was spent): every GPU test of the kernels
# the even split-K deal touches (the session ran only the split, plain and even ones), then
# a batch-8 demo on the final tree. One call, under 10 minutes.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-gpu-tests-dot 360 python3 -m pytest -m gpu -q tests/test_linear.py tests/test_linear_qkv.py tests/test_decode_plan.py
t 2-demo-tinyllama-b8 180 python3 -m tilegraph demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps --out /tmp/demo2
tar czf $OUT/extra.tgz -C /tmp demo2 2>/dev/null

# Session 94, call 3: the GPU tests of tests/test_decode_plan.py that calls 1-2 did not reach
# (the first five ran there), and a batch-4 Qwen2-0.5B demo (3-4 rows take the even split).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
f=tests/test_decode_plan.py
t 7-gpu-tests-plan-rest 290 python3 -m pytest -m gpu -q $f -k "not test_candidates_are_correct_on_gpu or 16-dtype1"
t 8-demo-qwen-b4 170 python3 -m tilegraph demo --model qwen2-0.5b --batch 4 --variants tilegraph --no-sweeps --out /tmp/demo8
tar czf $OUT/extra.tgz -C /tmp demo8 2>/dev/null

# Session 98, call 2: on the tree with the contiguous split-K partials landed (b049eaf):
# the other GPU tests that run split plans, then issue 17's decode grid, bf16 and fp16.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 4-gpu-tests-stacks 190 python3 -m pytest -m gpu -q -x tests/test_norm_handoff.py tests/test_decode_stack.py tests/test_layerstack.py tests/test_decode_layer.py tests/test_decode_plan.py
t 5-decode-grid-bf16 170 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/grid5 --format md,json
t 6-decode-grid-fp16 170 python3 -m tilegraph bench decode-grid --dtype fp16 --out /tmp/grid6 --format md,json
tar czf $OUT/extra-call2.tgz -C /tmp grid5 grid6 2>/dev/null

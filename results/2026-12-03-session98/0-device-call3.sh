# Session 98, call 3: issue 17's decode grid, bf16, on the contiguous partials (call 2 gave
# it 170 s and it was stopped at 39 of 45 points), then the rest of call 2's GPU tests
# (test_decode_plan; call 2 ran decode_stack, layerstack, decode_layer, 20 passed, before
# its limit).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 7-decode-grid-bf16 270 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/grid7 --format md,json
t 8-gpu-tests-plan 240 python3 -m pytest -m gpu -q tests/test_decode_plan.py
tar czf $OUT/extra-call3.tgz -C /tmp grid7 2>/dev/null

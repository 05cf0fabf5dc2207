# Session 102 call 5: the final tree (split doubled below 1.5 an SM, the tile taken from 1.4):
# the fp32 GPU tests, stacks and lone projections at d = 1472 and 1536 (now weight-left),
# and issue 17's fp32 grid at 8 and 16 rows (no shape of it changes tile: a check).
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-tests 50 python3 -m pytest -q -x --durations=5 tests/test_decode_plan.py tests/test_norm_handoff.py tests/test_layerstack.py tests/test_decode_stack.py -k "(weight_left or fp32 or float32 or tf32 or rule_by_rows) and not candidates" -p no:cacheprovider
t 2-stacks 40 python3 -m tilegraph bench stack-grid --dtype fp32 --widths 1408,1472,1536 --rows 6,16 --out /tmp/s2 --format md,json
t 3-lone 40 python3 research/probe_offlist_grid.py --dtype fp32 --rows 6,16 --shapes 1472x1472,1536x1536,1536x4096,3072x256
t 4-grid 75 python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8,16 --out /tmp/g4 --format md,json

# Session 100 call 5, the final tree: the plain-projection GPU tests (new: the x-left tile
# and fp32's row loop timed on first calls), issue 17's fp16 grid, the fp32 grid at 8 rows
# (the one grid column the fp32 change reaches).
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 10-gpu-tests 100 python3 -m pytest -m gpu -q tests/test_decode_plan.py -k "plain or other or x_left or fp32"
t 11-decode-grid-fp32-8rows 90 python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8 --out /tmp/g11 --format md,json
t 12-decode-grid-fp16 220 python3 -m tilegraph bench decode-grid --dtype fp16 --out /tmp/g12 --format md,json

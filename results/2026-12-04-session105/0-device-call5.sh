# Session 105, call 5 (the budget's last ~4 minutes, limits 80/45): the GPU tests of the row
# loop after 0f1e1ee and of the plans tune and plain_plan time after 31d4d74; then issue 17's
# fp32 grid at 3 and 4 rows, where plain projections now time both turns.
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-tests 80 python3 -m pytest -q -m gpu tests/test_linear.py tests/test_decode_plan.py -k "row_loop or block_shapes or candidates or plain" -p no:cacheprovider
t 2-grid-fp32-3-4 45 python3 -m tilegraph bench decode-grid --dtype fp32 --rows 3,4 --out /tmp/o2

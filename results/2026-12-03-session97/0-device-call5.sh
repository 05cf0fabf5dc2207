# Session 97, call 5 (about 2 minutes): how a whole-slice plan's time grows with its rows,
# 2 to 16, on three shapes of split 4-8 (the rule's plan against the 512-column slices and
# the unsplit tile): if the 8 -> 16 row cost follows the partials (rows x split), it grows
# with the row count and with the split.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 16-probe-rows-2-16 150 python3 research/probe_wide_rows.py --shapes 2048x2048,1024x1024,1536x1536 --rows 2,4,6,8,10,12,14,16

# Session 100 call 2: which second tensor-core tile plain_plan should time beside the rule
# at 3-16 16-bit rows (research/probe_second_tile.py), bf16 at 4 and 16 rows on 14 shapes.
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 4-second-tile-bf16 540 python3 research/probe_second_tile.py --rows 4,16 --rounds 3

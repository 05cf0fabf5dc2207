# Session 99, call 3 (about 6 minutes): issue 17's fp16 grid a second time on the tree with
# the contiguous split-K partials (session 98 read 1.315x once), and the bf16 grid at the row
# counts it skips (3, 6, 12) on the same tree (session 97 read 1.230x before the change).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 8-decode-grid-fp16 200 python3 -m tilegraph bench decode-grid --dtype fp16 --out /tmp/g8 --format md,json
t 9-decode-grid-bf16-offrows 200 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 3,6,12 --out /tmp/g9 --format md,json
tar czf $OUT/extra-call3.tgz -C /tmp g8 g9 2>/dev/null

# Session 100 call 6: tg.linear on seven more wide-N shapes no issue or probe named before
# (bf16 at 5 and 8 rows), the final tree against the tree without x-left.patch (/tmp/B).
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session100/x-left.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
SHAPES=8960x1536,27648x5120,24576x1536,12288x4096,13696x3584,9216x2304,20480x2560
t 13-offlist-tree 110 $PWD/src python3 research/probe_offlist_grid.py --dtype bf16 --rows 5,8 --shapes $SHAPES
t 14-offlist-before 110 /tmp/B/src python3 research/probe_offlist_grid.py --dtype bf16 --rows 5,8 --shapes $SHAPES

# Session 100 call 3: plain_plan timing the x-left tile beside the weight-left tile unsplit
# (x-left.patch, in the tree): issue 17's bf16 grid on the tree; tg.linear off the list
# (wide-N projections, bf16 and fp16 at 3 and 12 rows) on the tree and on the tree without
# the patch (/tmp/B); the plain-projection GPU tests.
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session100/x-left.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
SHAPES=18944x3584,9728x896,17920x1536,11008x4096,10240x2560,13824x5120,11264x2048,16384x3072,7168x1024
t 5-gpu-tests 90 $PWD/src python3 -m pytest -m gpu -q tests/test_decode_plan.py -k "plain or other or x_left or fp32"
t 6-offlist-tree 150 $PWD/src python3 research/probe_offlist_grid.py --dtype bf16,fp16 --rows 3,12 --shapes $SHAPES
t 7-offlist-before 150 /tmp/B/src python3 research/probe_offlist_grid.py --dtype bf16,fp16 --rows 3,12 --shapes $SHAPES
t 8-decode-grid-bf16 200 $PWD/src python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/g8 --format md,json

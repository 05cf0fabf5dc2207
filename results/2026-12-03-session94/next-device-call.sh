# Written in session 94 for the next session, not run: one call, about 8-9 minutes.
# 1. research/probe_cluster_split.py over three N x 2048 shapes at 4, 8 and 16 rows: the
#    split-K partials of one-step weight-left tiles (64 x 256, split 8) summed four ways.
#    Session 94's first look (2048^2 only): the library's own plan 4.06 / 4.82 us at 4 / 16
#    rows, the probe's contiguous-tile counter 4.26 / 4.31; clusters slower. The "rows" mode
#    (the library's workspace layout) against "atomic" (a contiguous tile a program) says
#    whether the layout is what costs the library 0.5 us at 16 rows.
# 2. The library with research/contiguous_partials.diff (each program's partial tile
#    contiguous) against without, A B A, on the decode grid's split-K shapes at 4-16 rows;
#    each run with its own fresh caches (plain_plan's verdicts do not know the kernel changed).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-probe-cluster-split 200 python3 research/probe_cluster_split.py --shapes 2048x2048,3072x2048,5632x2048 --rows 4,8,16 --rounds 2
grid() { t $1 70 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 4,8,16 --shapes 2048x2048,2048x5632,4096x4096,5632x2048 --out /tmp/$1 --format md,json; }
grid 2-grid-old
patch -p1 < research/contiguous_partials.diff > $OUT/3-patch.txt 2>&1
grid 4-grid-contiguous
PYTHONPATH=$PWD/src timeout 100 python3 -m pytest -m gpu -q -x tests/test_linear.py -k "split or norm" > $OUT/5-gpu-tests-contiguous.txt 2>&1
patch -R -p1 < research/contiguous_partials.diff >> $OUT/3-patch.txt 2>&1
grid 6-grid-old-again
tar czf $OUT/extra.tgz -C /tmp 2-grid-old 4-grid-contiguous 6-grid-old-again 2>/dev/null

# Session 101 call 2: the fp32 weight-left tile near its fill bound. Call 1 found stacks at
# d = 1664 (26 blocks x split 8 = 208 programs, 1.58 an SM) slower with it (137.6 -> 143.3
# us at 6 rows) while every lone projection and stack at 1.78 an SM or more was faster.
# Here lone projections at 1.52-1.70 an SM, tree (bound 1.5) against the tree without the
# tile (/tmp/B), stacks at d = 1728 (1.64) and 1792 (1.70), and the fp32 GPU tests that
# call 1's 150 s cut off (7 of 13 had passed).
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session100/fp32-weight-left.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
S=1664x1664,1600x4096,1728x2048,3456x4096,4608x4608,13824x5120,1792x1792
t 1-near-tree 60 $PWD/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 6,12 --shapes $S
t 2-near-before 60 /tmp/B/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 6,12 --shapes $S
t 3-stacks-tree 45 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 1728,1792 --rows 6,12 --out /tmp/s3 --format md,json
t 4-stacks-before 45 /tmp/B/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 1728,1792 --rows 6,12 --out /tmp/s4 --format md,json
t 5-tests 280 $PWD/src python3 -m pytest -q -x --durations=0 tests/test_decode_plan.py tests/test_layerstack.py tests/test_decode_stack.py -k "fp32 or float32 or tf32 or rule_by_rows or candidates_are_correct" -p no:cacheprovider

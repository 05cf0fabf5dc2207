# session 89, call 2: the two-row persistent GEMV's tail tile and its timed window past 64 MiB
# (research/two_row_tail.diff, in the tree), old tree (diff reverted) vs new in one call;
# one-row gate/up widened or not (sweep); GPU tests of the changed kernels
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-sweep-gateup-widen 100 python3 research/sweep_gemv.py --out /tmp/sweep1 --persistent --widen --rows 1 --only gate/up
patch -R -p1 -s < research/two_row_tail.diff || exit 1
t 2-grid-rows2-old 60 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 2 --out /tmp/grid2 --format md,json
t 3-demo-tinyllama-b2-old 80 python3 -m tilegraph demo --model tinyllama --batch 2 --variants tilegraph --no-sweeps --out /tmp/o-b2
patch -p1 -s < research/two_row_tail.diff || exit 1
t 4-grid-rows2-new 60 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 2 --out /tmp/grid4 --format md,json
t 5-demo-tinyllama-b2-new 80 python3 -m tilegraph demo --model tinyllama --batch 2 --variants tilegraph --no-sweeps --out /tmp/n-b2
t 6-gpu-tests 170 python3 -m pytest -q tests/test_linear.py tests/test_decode_plan.py -m gpu -k "persistent or norm or swiglu or two or tail or plain or several or narrow"
cd /tmp && tar czf $OUT/extra.tgz sweep1 grid2 grid4 o-b2 n-b2 2>/dev/null

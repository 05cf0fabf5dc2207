# written in session 89 for the next session (not run): Qwen2-0.5B's one-row projections
# (rows of 896 columns) in small persistent tiles at 4-8 programs an SM, widened or not
# (alone, its gate/up took 5.48 us widened at 16 KB / 4 warps / 8 an SM against the rule's
# 6.16-6.72, file 4), and its b1 demo as the baseline a step variant would have to beat
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-sweep-qwen-widen 120 python3 research/sweep_gemv.py --out /tmp/sweep1 --persistent --widen --rows 1 --only qwen2-0.5b
t 2-demo-qwen2-0.5b-b1 120 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo2
cd /tmp && tar czf $OUT/extra.tgz sweep1 demo2 2>/dev/null

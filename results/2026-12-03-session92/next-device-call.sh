# Written in session 92, not run (its device time was spent): the b1 demos of issue 20's two
# models on the tree that tries 0 / 1 / 2 / 4 MiB of prefetch, TinyLlama first; then what
# plain_plan keeps on the bf16 grid's latency-bound shapes (issue 17). One call, under 6 minutes.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 10-demo-tinyllama-b1-final 95 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo10
t 11-demo-qwen-b1-final 95 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo11
# Issue 17's bf16 grid (1.292x, 1.3x asked): session 89's grid ran 5632 x 2048 at 8-16 rows on
# cuBLAS (8.1 us) where session 88's ran the tensor-core rule at 7.75. What plain_plan times
# and keeps there, three fresh caches a point, beside the grid's other latency-bound points:
t 12-plain-pick 150 python3 research/probe_plain_pick.py --shape 5632x2048,2048x5632,2048x2048 --rows 4,8,16 --dtypes bf16 --repeats 3

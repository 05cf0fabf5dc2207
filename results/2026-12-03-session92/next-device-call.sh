# Written in session 92, not run (its device time was spent): the b1 demos of issue 20's two
# models on the tree that tries 0 / 1 / 2 / 4 MiB of prefetch, TinyLlama first.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 10-demo-tinyllama-b1-final 95 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo10
t 11-demo-qwen-b1-final 95 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo11

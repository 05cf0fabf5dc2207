# session 87, call 3: attention releasing the output projection once a run has attended (not at its wait); the demo in a fresh and a warm process
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 6-probe-release-late-short 100 python3 research/probe_attention_tile.py tinyllama:1@160,tinyllama:1@255,qwen2-0.5b:1@255 --only pre2,pre2/late
t 7-probe-release-late 200 python3 research/probe_attention_tile.py tinyllama:1@320,tinyllama:1@383,tinyllama:1@1023,qwen2-0.5b:1@383,llama3.2-1b:1@383 --only runs1,runs1/late,runs2,runs2/late
t 8-demo-tinyllama-b1-fresh 150 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/d8
export TILEGRAPH_CACHE_DIR=/tmp/tg-8-demo-tinyllama-b1-fresh TRITON_CACHE_DIR=/tmp/tr-8-demo-tinyllama-b1-fresh
{ echo "\$ (same caches as file 8) python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps"; timeout 120 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/d9; echo "rc=$?"; } > $OUT/9-demo-tinyllama-b1-warm.txt 2>&1

# session 87, call 6: the persistent GEMV's norm weights loaded with x, before the sum of squares' barrier: GPU tests, the projections alone, demos
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 13-decode-grid-norm-loads 60 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 1 --shapes 11264x2048,5632x2048,14336x4096 --out $OUT/grid13 --format md
t 14-demo-tinyllama-b1 110 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/d14
t 15-gpu-tests-linear 120 python3 -m pytest -q -x tests/test_linear.py -m gpu -k "persistent or norm"
t 16-demo-llama3.2-1b-b1 110 python3 -m tilegraph demo --model llama3.2-1b --batch 1 --variants tilegraph --no-sweeps --out /tmp/d16

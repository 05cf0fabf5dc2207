# session 86, call 5: the output projection's L2 prefetch of gate/up, chosen in the batch-1 step: GPU tests, demos
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 8-gpu-tests-l2-ahead 150 python3 -m pytest -q -x tests/test_linear.py tests/test_decode_plan.py tests/test_generate.py -k "l2_prefetch or release_points_are_chosen"
t 9-demo-tinyllama-b1 170 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/d9
find /tmp/tg-9-demo-tinyllama-b1 -name "*ahead*" -exec sh -c 'echo "== $1"; head -c 800 "$1"; echo' _ {} \; >> $OUT/9-demo-tinyllama-b1.txt 2>&1
t 10-demo-qwen2-b1 150 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/d10
find /tmp/tg-10-demo-qwen2-b1 -name "*ahead*" -exec sh -c 'echo "== $1"; head -c 800 "$1"; echo' _ {} \; >> $OUT/10-demo-qwen2-b1.txt 2>&1

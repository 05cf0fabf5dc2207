# session 87, call 1: gate/up's first bytes into L2 from the output projection, with attention's launch forced to the Generator's band picks
set -u
export PYTHONPATH=$PWD/src:$PWD/research
patch -p1 -s < research/l2_ahead.diff || exit 1
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/0-gpu.txt
t 1-probe-l2-pre2 190 python3 research/probe_l2_ahead.py tinyllama:1@160,tinyllama:1@255,qwen2-0.5b:1@255 --mb 0,4,8,16 --attention pre2
t 2-probe-l2-runs1 190 python3 research/probe_l2_ahead.py tinyllama:1@320,tinyllama:1@383,qwen2-0.5b:1@383 --mb 0,4,8,16 --attention runs1
t 3-demo-tinyllama-b1 170 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/d3
find /tmp/tg-3-demo-tinyllama-b1 -name "*in-step*" -exec sh -c 'echo "== $1"; cat "$1"; echo' _ {} \; >> $OUT/3-demo-tinyllama-b1.txt 2>&1

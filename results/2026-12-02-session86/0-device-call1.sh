# session 86, call 1: what a merge outside attention could save in the step (bound: no merge)
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/0-gpu.txt
t 1-probe-merge-bound 540 python3 research/probe_attention_tile.py tinyllama:1@160,tinyllama:1@255,tinyllama:1@320,tinyllama:1@383,tinyllama:1@1023,tinyllama:1@1800,qwen2-0.5b:1@255,qwen2-0.5b:1@383,qwen2-0.5b:1@1800,tinyllama:8@255,tinyllama:8@1800 --only rule,pre2,runs1,runs1/apart,runs1/none,apart,apart/none

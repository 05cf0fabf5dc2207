# session 86, call 4: the output projection prefetching gate/up's first bytes into L2 before its wait
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 7-probe-l2-ahead 280 python3 research/probe_l2_ahead.py tinyllama:1@255,tinyllama:1@383,qwen2-0.5b:1@255,qwen2-0.5b:1@383,llama3.2-1b:1@255 --mb 0,4,8,16,24,32

# session 87, call 4: where the batch-1 step goes with the Generator's band launches (exposed us by place in a layer)
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 10-profile-short-band 120 python3 research/probe_attention_tile.py tinyllama:1@255,qwen2-0.5b:1@255 --only pre2 --profile
t 11-profile-second-band 120 python3 research/probe_attention_tile.py tinyllama:1@383,qwen2-0.5b:1@383 --only runs2,runs1 --profile

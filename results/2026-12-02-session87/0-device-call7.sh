# session 87, call 7: where the batch-1 step goes with the persistent GEMV's norm weights loaded with x (against file 10)
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 17-profile-short-band-norm-loads 90 python3 research/probe_attention_tile.py tinyllama:1@255,llama3.2-1b:1@255 --only pre2 --profile

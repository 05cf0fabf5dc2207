# session 87, call 2: attention's runs merged from flagged words (no fence, no counter): GPU tests, steps
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 4-gpu-tests-attention 200 python3 -m pytest -q -x tests/test_decode_attention.py -m gpu
t 5-probe-flagged 330 python3 research/probe_attention_tile.py tinyllama:1@320,tinyllama:1@383,tinyllama:1@1023,tinyllama:1@1800,qwen2-0.5b:1@383,qwen2-0.5b:1@1800,llama3.2-1b:1@383,tinyllama:8@1800 --only runs1,runs1/flag,runs2,runs2/flag

# session 86, call 3: the projection's merge with normalised runs: per column (a) and per head gathered (b)
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
P="tinyllama:1@255,tinyllama:1@383,tinyllama:1@1023,tinyllama:1@1800,qwen2-0.5b:1@383,qwen2-0.5b:1@1800"
t 4-probe-merge-out-column 200 python3 research/probe_attention_tile.py $P --only pre2,runs1,runs1/none,runs1/out,runs2/out
export TG_MERGE_BY_HEAD=1; t 5-probe-merge-out-head 200 python3 research/probe_attention_tile.py $P --only runs1,runs1/out,runs2/out; unset TG_MERGE_BY_HEAD
t 6-gpu-tests-projection 100 python3 -m pytest -q -x tests/test_attention_projection.py "tests/test_decode_attention.py::test_runs_left_for_their_reader_match_reference"

# session 86, call 2: the output projection merging attention's runs (MERGE_OUT), in steps; GPU tests
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 2-probe-merge-out 260 python3 research/probe_attention_tile.py tinyllama:1@255,tinyllama:1@383,tinyllama:1@1023,tinyllama:1@1800,qwen2-0.5b:1@255,qwen2-0.5b:1@383,qwen2-0.5b:1@1800 --only pre2,runs1,runs1/none,runs1/out,runs1/out4,runs2/out
t 3-gpu-tests-projection 250 python3 -m pytest -q -x tests/test_attention_projection.py tests/test_llama.py "tests/test_decode_attention.py::test_runs_left_for_their_reader_match_reference"

# Written in session 96 for the next session, not run: about 8 minutes.
# 1. The GPU tests of the models end to end on this tree (tg.Generator now times the
#    whole-slice tiles' K loop in its steps at 4-16 rows): test_generate and test_llama whole.
# 2. tg.Generator, the step tuner's pick against every loop kept ("loop-kept"), A B A B, on
#    Qwen2-0.5B at batch 8 and 16 (q|k|v and output take whole-slice tiles) and Qwen2-1.5B at
#    batch 8: shapes session 96 did not time.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-gpu-tests-models 240 python3 -m pytest -m gpu -q tests/test_generate.py tests/test_llama.py
t 2-generator-qwen-b8 90 python3 research/time_generator.py s97 qwen2-0.5b 128 2048 8 bands,loop-kept,bands,loop-kept
t 3-generator-qwen-b16 90 python3 research/time_generator.py s97 qwen2-0.5b 128 2048 16 bands,loop-kept,bands,loop-kept
t 4-generator-qwen1.5b-b8 90 python3 research/time_generator.py s97 qwen2-1.5b 128 2048 8 bands,loop-kept,bands,loop-kept

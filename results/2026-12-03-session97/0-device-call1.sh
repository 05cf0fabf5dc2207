# Session 97, call 1 (about 9 minutes).
# 1. The GPU tests of the models end to end on session 96's tree (tg.Generator times the
#    whole-slice tiles' K loop in its steps at 4-16 rows): test_generate and test_llama whole.
# 2. tg.Generator, the step tuner's pick against every loop kept ("loop-kept"), A B A B, on
#    Qwen2-0.5B at batch 8 and 16: shapes session 96 did not time.
# 3. tilegraph tune at 16 rows on two whole-slice shapes: 2048^2 reads at 42% of the floor at
#    16 rows against 49% at 8 with the same plan (issue 17's grid); is any candidate faster?
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-gpu-tests-models 240 python3 -m pytest -m gpu -q tests/test_generate.py tests/test_llama.py
t 2-generator-qwen-b8 90 python3 research/time_generator.py s97 qwen2-0.5b 128 2048 8 bands,loop-kept,bands,loop-kept
t 3-generator-qwen-b16 90 python3 research/time_generator.py s97 qwen2-0.5b 128 2048 16 bands,loop-kept,bands,loop-kept
t 4-tune-16rows 110 python3 -m tilegraph tune --shapes 2048x2048,2560x2048 --rows 16 --dtype bf16 --out $OUT/tune4

# Session 96, call 4: the step tuner's per-projection choice of the whole-slice tile's K loop
# left out (tune.tune_one_step_in_step_once), on the GPU: its tests, then tg.Generator with
# the choice against every loop kept ("loop-kept"), A B A B in one process.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 16-gpu-tests 120 python3 -m pytest -m gpu -q tests/test_generate.py tests/test_linear.py -k "whole_slice or tuned_projection or greedy_tokens or one_step"
t 17-generator-tinyllama-b8 100 python3 research/time_generator.py s96 tinyllama 128 2048 8 bands,loop-kept,bands,loop-kept
t 18-generator-d1024-b8 90 python3 research/time_generator.py s96 d1024-h128 128 2048 8 bands,loop-kept,bands,loop-kept
t 19-generator-llama1b-b16 100 python3 research/time_generator.py s96 llama3.2-1b 128 2048 16 bands,loop-kept,bands,loop-kept
t 20-generator-tinyllama-b4 90 python3 research/time_generator.py s96 tinyllama 128 2048 4 bands,loop-kept,bands,loop-kept

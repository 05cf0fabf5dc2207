# Session 96, call 3: the three never-run-loop settings one at a time in tg.Generator (calls 1
# and 2 timed them together: slower at batch 1 and on d1024-h128 b8, 1.4% faster on TinyLlama
# b8). A B C A B C in one process each.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 12-generator-tinyllama-b8 120 python3 research/time_generator.py s96 tinyllama 128 2048 8 bands,preloaded-runs,one-step,bands,preloaded-runs,one-step
t 13-generator-qwen-b1 100 python3 research/time_generator.py s96 qwen2-0.5b 128 2048 1 bands,preloaded-runs,one-tile,bands,preloaded-runs,one-tile
t 14-generator-tinyllama-b1 100 python3 research/time_generator.py s96 tinyllama 128 2048 1 bands,preloaded-runs,one-tile,bands,preloaded-runs,one-tile
t 15-generator-d1024-b8 100 python3 research/time_generator.py s96 d1024-h128 128 2048 8 bands,preloaded-runs,one-step,bands,preloaded-runs,one-step

# Session 96, call 2: tg.Generator with the never-run K loops compiled out ("loops-out")
# against without ("bands"), A B A B in one process: session 94's call 2 with Qwen2-0.5B b8
# swapped for d1024-h128 b8 (session 95's call 3: three whole-slice tiles a layer).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 5-generator-qwen-b1 110 python3 research/time_generator.py s96 qwen2-0.5b 128 2048 1 bands,loops-out,bands,loops-out
t 6-generator-tinyllama-b1 120 python3 research/time_generator.py s96 tinyllama 128 2048 1 bands,loops-out,bands,loops-out
t 7-generator-tinyllama-b8 160 python3 research/time_generator.py s96 tinyllama 128 2048 8 bands,loops-out,bands,loops-out
t 9-generator-d1024-b8 170 python3 research/time_generator.py s96 d1024-h128 128 2048 8 bands,loops-out,bands,loops-out

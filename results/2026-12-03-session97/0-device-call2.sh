# Session 97, call 2 (about 6 minutes).
# 5. research/probe_wide_rows.py: the tensor-core kernel's rule at 8, 12 and 16 rows against
#    plans with fewer split-K partials (call 1's tune: 2048^2 and 2560 x 2048 at 16 rows 4-11%
#    faster on them), on ten shapes of 2-32 MiB.
# 6. tg.Generator, the step tuner's pick against every loop kept, A B A B, Qwen2-1.5B batch 8
#    (session 96's ready call, the part call 1 left out).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 5-probe-wide-rows 300 python3 research/probe_wide_rows.py
t 6-generator-qwen1.5b-b8 100 python3 research/time_generator.py s97 qwen2-1.5b 128 2048 8 bands,loop-kept,bands,loop-kept

# Written in session 94 for the next session, not run: call 2 of 2, about 8 minutes.
# tg.Generator with the never-run K loops compiled out against without, A B A B in one
# process (research/time_generator.py's "loops-out" variant: _dot_rows.COMPILE_ONE_STEP,
# _matvec.COMPILE_ONE_TILE and decode_attention.COMPILE_PRELOADED_RUNS on): batch 1 (the
# one-row GEMV's split tiles: TinyLlama's q|k|v and output, Qwen2-0.5B's q|k|v, output and
# gate/up; attention in the 1-256 band) and batch 8 (the whole-slice tensor-core tiles:
# TinyLlama's 2048^2, Qwen2-0.5B's 1152 x 896 and 896^2). Use "one-step" / "one-tile" /
# "preloaded-runs" to tell them apart where loops-out moves a model.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 5-generator-qwen-b1 110 python3 research/time_generator.py s95 qwen2-0.5b 128 2048 1 bands,loops-out,bands,loops-out
t 6-generator-tinyllama-b1 120 python3 research/time_generator.py s95 tinyllama 128 2048 1 bands,loops-out,bands,loops-out
t 7-generator-tinyllama-b8 160 python3 research/time_generator.py s95 tinyllama 128 2048 8 bands,loops-out,bands,loops-out
t 8-generator-qwen-b8 150 python3 research/time_generator.py s95 qwen2-0.5b 128 2048 8 bands,loops-out,bands,loops-out

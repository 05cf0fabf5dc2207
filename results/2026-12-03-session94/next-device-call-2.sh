# Written in session 94 for the next session, not run: call 2 of 2, about 8 minutes.
# tg.Generator with the one-step kernel against without, A B A B in one process
# (research/time_generator.py's "one-step" variant), at the batches whose projections take
# one-step plans (TinyLlama's 2048^2 q and o at 4-16 rows, Qwen2-0.5B's 1152 x 896 q|k|v and
# 896^2 o at 8-16); then, if call 1 says the loop out wins, the decode grid in bf16 with it.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 6-generator-tinyllama-b8 220 python3 research/time_generator.py s95 tinyllama 128 2048 8 bands,one-step,bands,one-step
t 7-generator-qwen-b8 200 python3 research/time_generator.py s95 qwen2-0.5b 128 2048 8 bands,one-step,bands,one-step
t 8-grid-bf16-one-step 170 python3 -c "import sys; from tilegraph.kernels import _dot_rows; _dot_rows.COMPILE_ONE_STEP = True; from tilegraph.cli import main; sys.exit(main(sys.argv[1:]))" bench decode-grid --dtype bf16 --out /tmp/grid8 --format md,json
tar czf $OUT/extra.tgz -C /tmp grid8 2>/dev/null

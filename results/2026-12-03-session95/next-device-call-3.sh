# Written in session 95 for a later session, not run: call 3, after session 94's
# next-device-call.sh and next-device-call-2.sh, about 8 minutes.
# 1. tg.Generator with the never-run K loops compiled out against without (A B A B in one
#    process) on d1024-h128 (no issue names it): at batch 8 three of its five projections a
#    layer (q|k|v, output, down) take a whole-slice tile whose loop never runs, more than any
#    named model (1-loops-never-run-bf16.txt); at batch 1 three take the split GEMV tile.
# 2. tests/test_llama.py's real-shape and 200-replay tests and tests/test_generate.py on the
#    GPU with the three settings on: the models' paths end to end against HF and eager.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 9-generator-d1024-b8 170 python3 research/time_generator.py s96 d1024-h128 128 2048 8 bands,loops-out,bands,loops-out
t 10-generator-d1024-b1 110 python3 research/time_generator.py s96 d1024-h128 128 2048 1 bands,loops-out,bands,loops-out
SET="import sys; from tilegraph.kernels import _dot_rows, _matvec, decode_attention as a; _dot_rows.COMPILE_ONE_STEP = _matvec.COMPILE_ONE_TILE = a.COMPILE_PRELOADED_RUNS = True"
t 11-gpu-tests-models-loops-out 250 python3 -c "$SET; import pytest; sys.exit(pytest.main(['-m', 'gpu', '-q', 'tests/test_llama.py', 'tests/test_generate.py', '-k', 'real_shape or replays or greedy_tokens or ragged or band or step or small_tiles']))"

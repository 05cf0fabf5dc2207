# Session 92, call 2: the output projection's L2 prefetch of gate/up's first weights, chosen
# per context band in the batch-1 step (Generator._tune_l2_ahead). Its GPU tests; then
# tg.Generator without it and with it in turn, in one process per model (time_generator.py's
# "no-l2" variant: every other choice shared), ms a token, b1, prompt 128, 256 new; then the
# TinyLlama b1 demo on this tree (issue 20's 70%).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 3-gpu-tests-l2 150 python3 -m pytest -m gpu -q tests/test_linear.py tests/test_decode_plan.py tests/test_generate.py -k "l2_prefetch or small_persistent or release_points or gemv_rows"
t 4-generator-l2-qwen 170 python3 research/time_generator.py l2 qwen2-0.5b 128 2048 1 no-l2,bands,no-l2,bands
t 5-generator-l2-others 150 python3 research/time_generator.py l2 tinyllama,d1024-h128 128 2048 1 no-l2,bands
t 6-demo-tinyllama-b1 100 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo6

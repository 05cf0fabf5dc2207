# Session 92, call 3: the L2 prefetch's amounts now 0 / 1 / 2 / 4 / 8 MiB (call 2: 0 / 4 / 8 /
# 16, where 4 MiB won every band it won). tg.Generator without it and with it in turn, one
# process a model (time_generator.py's "no-l2" variant), ms a token, b1, prompt 128, 256 new;
# Llama-3.2-1B as a model no issue's prefetch figure names; then the b1 demos of issue 20's two
# models on this tree. First the Generator's GPU test of the prefetch (the new amounts).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 6b-gpu-tests-l2 60 python3 -m pytest -m gpu -q tests/test_generate.py -k "l2_prefetch"
t 7-generator-l2-amounts 240 python3 research/time_generator.py l2 qwen2-0.5b,tinyllama,llama3.2-1b 128 2048 1 no-l2,bands
t 8-demo-qwen-b1 90 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo8
t 9-demo-tinyllama-b1 90 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo9

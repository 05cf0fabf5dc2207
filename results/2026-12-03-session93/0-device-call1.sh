# Session 93, call 1: the GPU tests 4a91b45 and the even split touch, the b1 demos of issue
# 20's two models (session 92's prefetch of 0 / 1 / 2 / 4 MiB per band), split-K steps dealt
# evenly against slices of equal width on the rule's plans at 4-16 rows, and every
# tensor-core candidate's time on the grid's 22 MB shapes (`tilegraph tune`; issue 17).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-gpu-tests 90 python3 -m pytest -m gpu -q -x tests/test_linear.py tests/test_generate.py tests/test_decode_plan.py -k "l2_prefetch or small_persistent or split_k"
t 2-probe-even-split 150 python3 research/probe_even_split.py
t 3-demo-tinyllama-b1 90 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo3
t 4-demo-qwen-b1 90 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo4
t 5-tune-22mb 150 python3 -m tilegraph tune --shapes 5632x2048,2048x5632 --rows 4,8,16 --dtype bf16 --out /tmp/tune5
tar czf $OUT/extra-call1.tgz -C /tmp demo3 demo4 tune5 2>/dev/null

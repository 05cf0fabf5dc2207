# Session 93, call 3: 16-bit split-K plans now deal K's steps out evenly, the longer slices
# first, by default; plain_plan times the equal cut beside them. GPU tests; the probe on this
# tree (even = the default now); TinyLlama at batch 8 (its down projection split 8 over 44
# steps) with the equal cut and with the even deal, A B A B in one process.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 9-gpu-tests 80 python3 -m pytest -m gpu -q tests/test_linear.py tests/test_decode_plan.py -k "split_k or plain or even"
t 10-probe-even-split 90 python3 research/probe_even_split.py --rows 8 --rounds 2
t 11-generator-tinyllama-b8 260 python3 research/time_generator.py s93 tinyllama 128 2048 8 equal-split,bands,equal-split,bands

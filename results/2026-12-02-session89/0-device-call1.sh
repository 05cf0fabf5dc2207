# written in session 88 for the next session (not run): the one-row persistent tile widened on SwiGLU projections only
# (research/one_row_widen_swiglu.diff), TinyLlama / Llama-3.2-1B / Qwen2-0.5B b1 demos without and with it, GPU tests with it
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
for m in tinyllama llama3.2-1b; do t 1-demo-$m-old 90 python3 -m tilegraph demo --model $m --batch 1 --variants tilegraph --no-sweeps --out /tmp/o-$m; done
patch -p1 -s < research/one_row_widen_swiglu.diff || exit 1
t 2-gpu-tests 90 python3 -m pytest -q -x tests/test_linear.py -m gpu -k "persistent or norm or swiglu"
for m in tinyllama llama3.2-1b; do t 3-demo-$m-widen 90 python3 -m tilegraph demo --model $m --batch 1 --variants tilegraph --no-sweeps --out /tmp/n-$m; done

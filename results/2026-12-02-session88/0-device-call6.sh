# session 88, call 6: the one-row persistent GEMV with its tile widened where used (WIDEN: 64 registers where 96-100, 4 programs of 8 warps an SM):
# the projections alone, then TinyLlama's b1 demo on the rule without it and (research/one_row_widen.diff applied) with it, GPU tests on the latter
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 18-sweep-widen-one-row 90 python3 research/sweep_gemv.py --out $OUT/sweep18 --persistent --widen --rows 1 --only "tinyllama gate/up,tinyllama down,llama3.2-1b gate/up,llama3.2-1b down,llama3-8b gate/up,llama3-8b o,tinyllama head,qwen2-1.5b gate/up"
t 19-demo-tinyllama-b1-old 80 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/d19
patch -p1 -s < research/one_row_widen.diff || exit 1
t 20-gpu-tests-widen 60 python3 -m pytest -q -x tests/test_linear.py -m gpu -k "persistent or norm or narrow"
t 21-demo-tinyllama-b1-widen 80 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/d21
cd $OUT && tar czf extra.tgz sweep18 2>/dev/null; rm -rf sweep18; ls

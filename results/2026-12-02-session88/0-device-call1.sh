# session 88, call 1: (a) the persistent GEMV with each next row block loaded before the current one is reduced (PIPELINE), alone over rotated weights;
# (b) the norm-rows kernel's weights loaded with x, before its barrier: baseline then changed, decode-grid at 4/8/16 rows, GPU tests, TinyLlama batch 8
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/0-gpu.txt
patch -p1 -s < research/gemv_pipeline.diff || exit 1
t 1-sweep-gemv-pipeline 190 python3 research/sweep_gemv.py --out $OUT/sweep1 --persistent --pipeline --only "tinyllama gate/up,llama3.2-1b gate/up,tinyllama down,llama3-8b gate/up"
patch -p1 -s -R < research/gemv_pipeline.diff || exit 1
SHAPES=2560x2048,11264x2048,2048x5632,1152x896,9728x896
t 2-grid-rows-base 80 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 4,8,16 --shapes $SHAPES --out $OUT/grid2 --format md
t 3-demo-b8-base 90 python3 -m tilegraph demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps --out /tmp/d3
patch -p1 -s < research/norm_rows_loads.diff || exit 1
t 4-gpu-tests-norm 60 python3 -m pytest -q -x tests/test_linear.py -m gpu -k norm
t 5-grid-rows-loads 80 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 4,8,16 --shapes $SHAPES --out $OUT/grid5 --format md
t 6-demo-b8-loads 90 python3 -m tilegraph demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps --out /tmp/d6
cd $OUT && tar czf extra.tgz sweep1 grid2 grid5 2>/dev/null; rm -rf sweep1 grid2 grid5; ls

# session 88, call 4: the two-row GEMV's NARROW launch (x kept 16-bit, widened per row, as many programs as fit) where no norm applies:
# GPU tests, the decode grid at 2 rows and TinyLlama's batch-2 demo, each on the new tree and (research/two_row_narrow.diff reverted) the old
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/0-gpu.txt
SHAPES=2048x2048,4096x4096,5632x2048,2560x2048,6144x4096,3072x3072,3584x3584,1536x1536
t 11-gpu-tests-narrow 130 python3 -m pytest -q -x tests/test_linear.py tests/test_decode_plan.py -m gpu -k "narrow or persistent or two_row or plain"
t 12-grid-rows2-new 80 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 2 --shapes $SHAPES --out $OUT/grid12 --format md
t 13-demo-tinyllama-b2-new 130 python3 -m tilegraph demo --model tinyllama --batch 2 --variants tilegraph --no-sweeps --out /tmp/d13
patch -p1 -s -R < research/two_row_narrow.diff || exit 1
t 14-grid-rows2-old 80 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 2 --shapes $SHAPES --out $OUT/grid14 --format md
t 15-demo-tinyllama-b2-old 130 python3 -m tilegraph demo --model tinyllama --batch 2 --variants tilegraph --no-sweeps --out /tmp/d15
patch -p1 -s < research/two_row_narrow.diff
cd $OUT && tar czf extra.tgz grid12 grid14 2>/dev/null; rm -rf grid12 grid14; ls

# session 89, call 4: the SwiGLU widening's GPU test (told by its PTX now) and the bench tests;
# issue 17's bf16 grid with compare()'s interleaved rounds
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 13-gpu-tests 90 python3 -m pytest -q tests/test_linear.py tests/test_bench.py -m gpu -k "widen or swiglu_real or compare or measure"
t 14-decode-grid-bf16-rounds 200 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/grid14 --format md,json
cd /tmp && tar czf $OUT/extra.tgz grid14 2>/dev/null

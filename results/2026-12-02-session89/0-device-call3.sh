# session 89, call 3: GPU tests of the widened SwiGLU tile and the two-row plans; issue 17's
# full decode grid in bf16 and fp16 on the final tree
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 7-gpu-tests 120 python3 -m pytest -q tests/test_linear.py tests/test_decode_plan.py -m gpu -k "widen or narrow or two or plain or swiglu_real"
t 8-decode-grid-bf16 170 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/grid8 --format md,json
t 9-decode-grid-fp16 170 python3 -m tilegraph bench decode-grid --dtype fp16 --out /tmp/grid9 --format md,json
cd /tmp && tar czf $OUT/extra.tgz grid8 grid9 2>/dev/null

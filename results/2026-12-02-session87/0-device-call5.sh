# session 87, call 5: TinyLlama's and Qwen2-0.5B's projections alone at one row (weights rotated past L2), against their exposed time in the step (files 10-11)
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 12-decode-grid-step-shapes 240 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 1 --shapes 2560x2048,2048x2048,11264x2048,2048x5632,1152x896,896x896,9728x896,896x4864 --out $OUT/grid --format md

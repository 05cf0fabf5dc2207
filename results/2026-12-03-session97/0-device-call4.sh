# Session 97, call 4 (about 6 minutes): the default path at batch sizes no issue names, on
# the committed tree (the 13-16-row plans dropped).
# 13. Issue 17's decode grid at 3, 6 and 12 rows, bf16.
# 14. Whole bf16 LayerStacks at 3, 6 and 12 rows, widths 768-4096 (the list is 512,
#     1024, 2048, 4096, 8192 at 1, 2, 4, 8, 16).
# 15. Issue 20's attention grid at batch 3, contexts 600 and 5000, fp16.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 13-decode-grid-offrows 170 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 3,6,12 --out /tmp/g13 --format md,json
t 14-stacks-offrows 110 python3 -m tilegraph bench stack-grid --dtype bf16 --widths 768,1280,2048,3072,4096 --rows 3,6,12 --out /tmp/s14 --format md,json
t 15-attention-offlist 90 python3 -m tilegraph bench attention-grid --dtype fp16 --rows 3 --contexts 600,5000 --out /tmp/a15 --format md,json

# Session 93, call 4: issue 17's decode grid, bf16 and fp16, on the final tree (16-bit split-K
# plans dealt evenly, the equal cut timed beside them by plain_plan).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 12-decode-grid-bf16 170 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/grid12 --format md,json
t 13-decode-grid-fp16 170 python3 -m tilegraph bench decode-grid --dtype fp16 --out /tmp/grid13 --format md,json
tar czf $OUT/extra-call4.tgz -C /tmp grid12 grid13 2>/dev/null

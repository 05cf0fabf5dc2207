# session 88, call 5: issue 17's decode grid, bf16 and fp16, on the final tree (untuned shapes: each point's first call timed)
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 16-decode-grid-bf16 150 python3 -m tilegraph bench decode-grid --dtype bf16 --out $OUT/grid16 --format md,json
t 17-decode-grid-fp16 150 python3 -m tilegraph bench decode-grid --dtype fp16 --out $OUT/grid17 --format md,json
cd $OUT && tar czf extra.tgz grid16 grid17 2>/dev/null; rm -rf grid16 grid17; ls

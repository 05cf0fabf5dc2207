# session 88, call 2: the persistent GEMV at 2 and 4 rows on plain projections of issue 17's grid and wider ones
# (the rule stops two-row GEMVs at 64 MiB and keeps 4 rows off them), against tg.linear's pick and cuBLAS
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/0-gpu.txt
t 7-sweep-grid-rows2 240 python3 research/sweep_gemv.py --out $OUT/sweep7 --persistent --grid --rows 2
t 8-sweep-grid-rows4 240 python3 research/sweep_gemv.py --out $OUT/sweep8 --persistent --grid --rows 4
cd $OUT && tar czf extra.tgz sweep7 sweep8 2>/dev/null; rm -rf sweep7 sweep8; ls

# session 87, call 7: the persistent GEMV with each next row block loaded before the current one is reduced (PIPELINE), alone over rotated weights
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
patch -p1 -s < research/gemv_pipeline.diff || exit 1
t 17-sweep-gemv-pipeline 200 python3 research/sweep_gemv.py --out $OUT/sweep17 --persistent --pipeline --only "tinyllama gate/up,llama3.2-1b gate/up,tinyllama down,llama3-8b gate/up"

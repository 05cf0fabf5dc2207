# Session 104 call 4: TinyLlama bf16 at batch 8, tree (L2_AHEAD_TILES = 1) against before (0).
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && sed -i 's/^L2_AHEAD_TILES = 1$/L2_AHEAD_TILES = 0/' /tmp/B/src/tilegraph/kernels/_dot_rows.py
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
D="demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps --new-tokens 32 --prompt-tokens 32 --max-seq 128"
t 1-demo-tree 150 $PWD/src python3 -m tilegraph $D --out /tmp/d1
t 2-demo-before 150 /tmp/B/src python3 -m tilegraph $D --out /tmp/d2
cd $OUT && tar czf all.tgz *.txt && rm *.txt

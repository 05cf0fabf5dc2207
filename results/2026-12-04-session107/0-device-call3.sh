# Session 107, call 3 (about 4 minutes): a model's generator after sessions 106-107 (step
# verdicts kept per row count): TinyLlama bf16 at batch 8 (session 104: 0.870 ms a token) and
# at batch 3, a batch no issue names (sizes 1, 2, 3).
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
D="demo --model tinyllama --variants tilegraph --no-sweeps --new-tokens 32 --prompt-tokens 32 --max-seq 128"
t 1-demo-bf16-b8 130 python3 -m tilegraph $D --batch 8 --out /tmp/d1
t 2-demo-bf16-b3 110 python3 -m tilegraph $D --batch 3 --out /tmp/d2
cd $OUT && tar czf all.tgz *.txt && rm *.txt

# Session 103, call 2 (about 9.5 minutes):
# 1-2. whole fp32 stacks at d = 1440 and 1472 (23 column blocks split 8, 1.39 an SM), 6 and
#    16 rows, on the tree (FP32_WEIGHT_LEFT_MIN_FILL 1.36: the weight-left tile) and before
#    (1.4: the x-left tile; min-fill.patch reverse-applied).
# 3. TinyLlama fp32 batch 8 with hf-graph beside tilegraph: the score harness's fix (each
#    step's logits copied) should let hf-graph pass its check.
# 4. Every GPU test (`pytest -m gpu`), in 8 shards at once (shard.py), each with its caches.
set -u
R=results/2026-12-04-session103
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -s -R -p1 < $OLDPWD/$R/min-fill.patch)
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
G="bench stack-grid --dtype fp32 --widths 1440,1472 --rows 6,16 --format md"
t 1-stacks-tree 60 $PWD/src python3 -m tilegraph $G --out /tmp/s1
t 2-stacks-before 60 /tmp/B/src python3 -m tilegraph $G --out /tmp/s2
t 3-demo-fp32-b8 90 $PWD/src python3 -m tilegraph demo --model tinyllama --dtype fp32 --batch 8 --variants hf-graph,tilegraph --no-sweeps --new-tokens 32 --prompt-tokens 32 --max-seq 128 --out /tmp/d3
for i in 0 1 2 3 4 5 6 7; do
  ( export SHARD=$i/8 PYTHONPATH=$PWD/src:$PWD/$R TILEGRAPH_CACHE_DIR=/tmp/tgs$i TRITON_CACHE_DIR=/tmp/trs$i
    timeout 350 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests > $OUT/4-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/4-tests-shard$i.txt ) &
done
wait
cd $OUT && tail -n 3 4-tests-shard*.txt > 4-tests-summary.txt && tar czf 4-tests.tgz 4-tests-shard*.txt && rm 4-tests-shard*.txt

# Session 103, call 3 (about 7.5 minutes):
# 1. issue 17's fp32 stacks at its widths, 8 rows (where the % of the floor stands now).
# 2. TinyLlama fp32 batch 8, hf-graph beside tilegraph (call 2's was cut at 90 s, before
#    the check printed); 3. hf-graph alone at batch 1 in fp32.
# 4. Call 2's shards 1 and 6 (cut by their 350 s limit after 36 and 42 passed tests), each
#    again in 4 pieces, 8 processes at once.
set -u
R=results/2026-12-04-session103
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-stacks-fp32-8rows 80 python3 -m tilegraph bench stack-grid --dtype fp32 --widths 1024,2048,4096,8192 --rows 8 --format md --out /tmp/s1
D="--dtype fp32 --no-sweeps --new-tokens 32 --prompt-tokens 32 --max-seq 128"
t 2-demo-fp32-b8 170 python3 -m tilegraph demo --model tinyllama --batch 8 --variants hf-graph,tilegraph $D --out /tmp/d2
t 3-demo-fp32-b1 45 python3 -m tilegraph demo --model tinyllama --batch 1 --variants hf-eager,hf-graph $D --out /tmp/d3
for s in 1 6; do for j in 0 1 2 3; do
  ( export SHARD=$s/8/$j/4 PYTHONPATH=$PWD/src:$PWD/$R TILEGRAPH_CACHE_DIR=/tmp/tgs$s$j TRITON_CACHE_DIR=/tmp/trs$s$j
    timeout 200 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests > $OUT/4-tests-shard$s-$j.txt 2>&1; echo "rc=$?" >> $OUT/4-tests-shard$s-$j.txt ) &
done; done
wait
cd $OUT && tail -n 3 4-tests-shard*.txt > 4-tests-summary.txt && tar czf 4-tests.tgz 4-tests-shard*.txt && rm 4-tests-shard*.txt

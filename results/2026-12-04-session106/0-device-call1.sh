# Session 106, call 1 (about 9 minutes): session 105's next-device-call.sh stages 1-3,
# the tests in 8 shards at once (session 105's call 5 passed 4 of 19 in one process in 80 s).
# 1. GPU tests of the row loop after 0f1e1ee and of the plans tune and plain_plan time.
# 1b. issue 17's fp32 grid at 3 and 4 rows (plain projections time both turns since 31d4d74).
# 2. lone fp32 at 3-4 rows: turned vs gathered at BLOCK_K 2048 and 1024.
# 2b. lone fp32 at 6 and 8 rows on narrow long rows (the K loop runs): turned vs gathered.
# 3. fp32 stacks at 3-4 rows: matvecT / matvecG at the rule's BLOCK_K and half.
set -u
for i in 0 1 2 3 4 5 6 7; do
  ( export SHARD=$i/8 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 110 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests/test_linear.py tests/test_decode_plan.py -k "row_loop or block_shapes or swiglu or candidates or plain" > $OUT/1-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
cd $OUT && tail -n 3 1-tests-shard*.txt > 1-tests-summary.txt && tar czf 1-tests.tgz 1-tests-shard*.txt && rm 1-tests-shard*.txt && cd - > /dev/null
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1b-grid-fp32-3-4 60 python3 -m tilegraph bench decode-grid --dtype fp32 --rows 3,4 --out /tmp/o1b
T='{"BLOCK_N": 8, "BLOCK_K": 2048, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
H='{"BLOCK_N": 8, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
t 2-lone-4rows 120 python3 research/sweep_dot_rows.py --out /tmp/o2 --dtype float32 --rows 3 4 \
  --shapes 4096 14336 8192 8192 2048 2048 5632 2048 14336 4096 1024 1024 \
  --tiles "[$T, \"GATHER_ROWS\": false}, $T, \"GATHER_ROWS\": true}, $H, \"GATHER_ROWS\": false}, $H, \"GATHER_ROWS\": true}]"
cp /tmp/o2/sweep-dot-rows.json $OUT/2-lone-4rows.json 2>/dev/null
E='{"BLOCK_N": 4, "BLOCK_K": 2048, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
t 2b-lone-8rows 60 python3 research/sweep_dot_rows.py --out /tmp/o2b --dtype float32 --rows 6 8 \
  --shapes 96 14336 200 8192 \
  --tiles "[$E, \"GATHER_ROWS\": false}, $E, \"GATHER_ROWS\": true}]"
cp /tmp/o2b/sweep-dot-rows.json $OUT/2b-lone-8rows.json 2>/dev/null
t 3-stacks-fp32 140 python3 research/stack_plans.py fp32 768x4,1024x4,1280x4,1024x3 rowloop
cd $OUT && tar czf all.tgz *.txt *.json && rm *.txt *.json

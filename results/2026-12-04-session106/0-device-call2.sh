# Session 106, call 2 (about 8 minutes).
# 1. The plain-plan GPU tests after plain_key took the exact row count (call 1 found the
#    3-row verdict, gathered, reused at 4 rows: 4096 x 14336 fp32 71.5 us against 62.1
#    turned), in 4 shards at once.
# 2. issue 17's fp32 grid at 3 and 4 rows (4 rows now timed at 4 rows).
# 3. fp32 projections no issue names at 3 and 4 rows.
# 4. bf16 stacks at 3-4 rows (the row loop's 16-bit share): matvecT / matvecG.
# 5. issue 17's bf16 grid at 1, 2 and 8 rows (not rerun whole since session 104).
set -u
for i in 0 1 2 3; do
  ( export SHARD=$i/4 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 100 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests/test_decode_plan.py tests/test_linear.py -k "plain or row_count" > $OUT/1-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 2-grid-fp32-3-4 60 python3 -m tilegraph bench decode-grid --dtype fp32 --rows 3,4 --out /tmp/o2
t 3-offlist-fp32 80 python3 research/probe_offlist_grid.py --dtype fp32 --rows 3,4 \
  --shapes 3072x2048,2048x8192,9728x896,896x4864,1536x8960,6144x4096,3000x1000,1000x3000
t 4-stacks-bf16 90 python3 research/stack_plans.py bf16 768x4,1024x3,1280x4 rowloop
t 5-grid-bf16 120 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 1,2,8 --out /tmp/o5
cd $OUT && tar czf all.tgz *.txt && rm *.txt

# Session 105, call 2 (about 9 minutes).
# 1. Every GPU test of test_decode_attention, test_linear and test_decode_plan (the kernels
#    that share _l2_prefetch.prefetch_lines since ab5e125), in 8 shards at once
#    (results/2026-12-04-session103/shard.py), each with its own caches; call 1's single
#    process passed 82 before its 150 s limit.
# 2-3. research/row_loop_gathered.diff (the row loop's sums gathered and turned once a step)
#    against the tree where the row loop runs: issue 17's fp32 grid at 2 and 4 rows (every
#    fp32 projection of 2-4 rows takes it) and fp32 stacks of d = 768-1280 at 2, 4, 8 rows.
set -u
for i in 0 1 2 3 4 5 6 7; do
  ( export SHARD=$i/8 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 200 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests/test_decode_attention.py tests/test_linear.py tests/test_decode_plan.py > $OUT/1-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
cd $OUT && tail -n 3 1-tests-shard*.txt > 1-tests-summary.txt && tar czf 1-tests.tgz 1-tests-shard*.txt && rm 1-tests-shard*.txt && cd - > /dev/null
mkdir -p /tmp/G && cp -r src /tmp/G/ && (cd /tmp/G && patch -s -p1 < $OLDPWD/research/row_loop_gathered.diff)
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 2-grid-tree 85 $PWD/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 2,4 --out /tmp/o2a
t 2-grid-gathered 85 /tmp/G/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 2,4 --out /tmp/o2b
t 3-stacks-tree 80 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 768,1024,1280 --rows 2,4,8 --out /tmp/o3a
t 3-stacks-gathered 80 /tmp/G/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 768,1024,1280 --rows 2,4,8 --out /tmp/o3b
cd $OUT && tar czf all.tgz *.txt && rm *.txt

# Session 105, call 3 (at most 570 s of limits). The row loop's sums gathered except at 3-4 rows
# (matvec_config's GATHER_ROWS) as committed, against the tree before (GATHER_ROWS False,
# sed on a copy of src: every row-loop plan turns each row's sums on its own, as before).
# 1. GPU tests of test_linear, test_linear_qkv, test_layerstack, test_decode_stack in 8 shards.
# 2. issue 17's fp32 grid at 2, 6, 8 rows (3-4 rows unchanged).
# 3. lone fp32 shapes no issue names at 2, 5, 7 rows.
# 4. fp32 stacks of d = 640, 1024, 1536 at 2, 5, 8 rows.
# 5. issue 17's bf16 grid at 2 rows (the row loop takes small weights there).
set -u
for i in 0 1 2 3 4 5 6 7; do
  ( export SHARD=$i/8 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 130 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests/test_linear.py tests/test_linear_qkv.py tests/test_layerstack.py tests/test_decode_stack.py > $OUT/1-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
cd $OUT && tail -n 3 1-tests-shard*.txt > 1-tests-summary.txt && tar czf 1-tests.tgz 1-tests-shard*.txt && rm 1-tests-shard*.txt && cd - > /dev/null
mkdir -p /tmp/B && cp -r src /tmp/B/
sed -i 's/"GATHER_ROWS": triton.next_power_of_2(M) != 4}/"GATHER_ROWS": False}/' /tmp/B/src/tilegraph/kernels/_matvec.py
grep -c '"GATHER_ROWS": False}' /tmp/B/src/tilegraph/kernels/_matvec.py > $OUT/0-before-check.txt
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
for side in tree before; do
  s=$PWD/src; [ $side = before ] && s=/tmp/B/src
  t 2-grid-$side 65 $s python3 -m tilegraph bench decode-grid --dtype fp32 --rows 2,6,8 --out /tmp/o2-$side
  t 3-off-$side 55 $s python3 -m tilegraph bench decode-grid --dtype fp32 --rows 2,5,7 --shapes 3000x1000,1536x1536,768x3072,12288x4096,1000x7000 --out /tmp/o3-$side
  t 4-stacks-$side 55 $s python3 -m tilegraph bench stack-grid --dtype fp32 --widths 640,1024,1536 --rows 2,5,8 --out /tmp/o4-$side
  t 5-bf16-$side 40 $s python3 -m tilegraph bench decode-grid --dtype bf16 --rows 2 --out /tmp/o5-$side
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

# Session 106, call 3 (about 8 minutes). research/row_loop_x_upfront.diff against the tree.
# In sm_90 SASS (research/decode_kernel_registers.py --dtype fp32 --row-loop) ptxas sinks the
# row loop's x loads where no norm reads them first: without a norm the 8-row tile issues
# rows 0-2, then 3, then 4, then 5-7, each after the previous rows' reductions (a round trip
# to L2 each); with a norm's sum of squares all 16 issue at the top. The diff sums x's squares
# in every row-loop role (one more reduction) and keeps them by a NaN test on the sums, so
# every role issues its x loads at the top (and the gathered 4-row residual role its 48 K-loop
# loads, session 105's suspect for its loss at 4 rows).
# 1. GPU tests of the row loop on the diff, in 4 shards.
# 2-5. tree / diff: fp32 stacks at 4 and 8 rows; lone fp32 at 4 rows, both turns; lone fp32
#    at 8 rows on the row loop; bf16 stacks at 3-4 rows.
set -u
mkdir -p /tmp/P && cp -r src /tmp/P/ && (cd /tmp/P && patch -s -p1 < $OLDPWD/research/row_loop_x_upfront.diff)
for i in 0 1 2 3; do
  ( export SHARD=$i/4 PYTHONPATH=/tmp/P/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 100 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests/test_linear.py -k "row_loop or block_shapes" > $OUT/1-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
T='{"BLOCK_N": 8, "BLOCK_K": 2048, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
E='{"BLOCK_N": 4, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
for side in tree diff; do
  s=$PWD/src; [ $side = diff ] && s=/tmp/P/src
  t 2-stacks-$side 60 $s python3 -m tilegraph bench stack-grid --dtype fp32 --widths 768,1024,1280 --rows 4,8 --out /tmp/o2-$side
  t 3-lone4-$side 50 $s python3 research/sweep_dot_rows.py --out /tmp/o3-$side --dtype float32 --rows 4 \
    --shapes 4096 14336 8192 8192 2048 2048 14336 4096 \
    --tiles "[$T, \"GATHER_ROWS\": false}, $T, \"GATHER_ROWS\": true}]"
  t 4-lone8-$side 40 $s python3 research/sweep_dot_rows.py --out /tmp/o4-$side --dtype float32 --rows 8 \
    --shapes 1024 1024 1536 1024 3000 1000 \
    --tiles "[$E, \"GATHER_ROWS\": false}, $E, \"GATHER_ROWS\": true}]"
  t 5-bf16-$side 45 $s python3 -m tilegraph bench stack-grid --dtype bf16 --widths 768,1024 --rows 3,4 --out /tmp/o5-$side
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

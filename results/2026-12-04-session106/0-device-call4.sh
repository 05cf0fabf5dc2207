# Session 106, call 4 (about 4 minutes): plain projections time the row loop's other turn
# wherever fp32's rule runs the row loop (2 rows; 5-8 rows on small weights), against the
# tree before (sed: only the 3-4 row turn, as in 31d4d74).
# 1. the plain-plan GPU tests, 4 shards.
# 2. issue 17's fp32 grid at 2 and 8 rows; 3. fp32 shapes no issue names at 2, 5, 6, 8 rows.
set -u
for i in 0 1 2 3; do
  ( export SHARD=$i/4 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 100 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider tests/test_decode_plan.py tests/test_linear.py -k "plain or row_count" > $OUT/1-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
mkdir -p /tmp/B && cp -r src /tmp/B/
sed -i 's/and (fp32 or not config.get("GATHER_ROWS"))):/and not config.get("GATHER_ROWS")):/' /tmp/B/src/tilegraph/kernels/decode_plan.py
grep -c 'and not config.get("GATHER_ROWS")):' /tmp/B/src/tilegraph/kernels/decode_plan.py > $OUT/0-before-check.txt
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
for side in tree before; do
  s=$PWD/src; [ $side = before ] && s=/tmp/B/src
  t 2-grid-$side 70 $s python3 -m tilegraph bench decode-grid --dtype fp32 --rows 2,8 --out /tmp/o2-$side
  t 3-off-$side 60 $s python3 -m tilegraph bench decode-grid --dtype fp32 --rows 2,5,6,8 --shapes 1024x1024,1536x1024,768x768,512x4096,3000x1000,1000x3000,1280x1280 --out /tmp/o3-$side
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

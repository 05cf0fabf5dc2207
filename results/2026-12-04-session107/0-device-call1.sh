# Session 107, call 1 (about 3 minutes): session 106's call 4 ran out of time on the fp32
# shapes no issue names; the same comparison, fewer points, longer limits: plain projections
# timing the row loop's other turn wherever fp32's rule runs the row loop (tree) against
# the tree before (sed: only the 3-4 row turn, as in 31d4d74).
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/
sed -i 's/and (fp32 or not config.get("GATHER_ROWS"))):/and not config.get("GATHER_ROWS")):/' /tmp/B/src/tilegraph/kernels/decode_plan.py
grep -c 'and not config.get("GATHER_ROWS")):' /tmp/B/src/tilegraph/kernels/decode_plan.py > $OUT/0-before-check.txt
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
for side in tree before; do
  s=$PWD/src; [ $side = before ] && s=/tmp/B/src
  t 1-off-$side 110 $s python3 -m tilegraph bench decode-grid --dtype fp32 --rows 2,8 --shapes 1024x1024,768x768,3000x1000,1000x3000,1280x1280,1536x1024 --out /tmp/o1-$side
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

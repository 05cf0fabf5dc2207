# Session 100 call 1 (written in session 99 as next-device-call.sh): about 6 minutes.
# 1. fp32 lone projections at 5-8 rows with the CUDA-core row loop timed beside tf32x3 and
#    cuBLAS (research/fp32_rows_other_plan.diff, applied to a copy of src/), against the tree,
#    on off-list shapes where 6 rows ran tf32x3 or cuBLAS at the 12-row cost (session 99, file
#    7: 3000 x 1000 10.70 us at 6 rows against 5.03 at 3 on the row loop; 9728 x 896 19.20 /
#    12.22; 3072 x 2048 14.77 / 9.15).
# 2. the plain-projection and fp32 GPU tests of test_decode_plan with the diff.
# If the diff wins (and nothing is slower, as timing should ensure): git apply it, commit.
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -p1 < $OLDPWD/research/fp32_rows_other_plan.diff) > $OUT/0-apply.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
SHAPES=3072x2048,896x4864,3000x1000,9728x896,6144x4096,1536x1024
t 1-offlist-fp32-tree 120 $PWD/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 5,6,8 --shapes $SHAPES
t 2-offlist-fp32-diff 120 /tmp/B/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 5,6,8 --shapes $SHAPES
t 3-gpu-tests-diff 150 /tmp/B/src python3 -m pytest -m gpu -q tests/test_decode_plan.py -k "plain or other or fp32"
PYTHONPATH=/tmp/B/src python3 -c "import tilegraph; print(tilegraph.__file__)" >> $OUT/0-apply.txt 2>&1

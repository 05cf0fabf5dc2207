# Session 101 call 1 (written in session 100): 9 minutes at most (stage limits).
# Landed in session 100 on stacks alone (fp32-weight-left.patch here): fp32 (tf32x3)
# tensor-core tiles with the weight on the mma's left (wgmma) where their programs number
# FP32_WEIGHT_LEFT_MIN_FILL (1.5) an SM (decode_plan.fp32_weight_left_config). Measured:
# stacks d = 2048, 3584, 4096, 8192 at 6-12 rows 4-15% faster; d = 1024, 1280 slower (now
# excluded by the bound). Not yet measured, here against the tree without the patch (/tmp/B):
# 1. the fp32 stack grid at widths near and past the bound (1536 stays x-left; 1664, 2560,
#    6144 take it) at 6, 8, 16 rows
# 2. issue 17's fp32 grid at 8 and 16 rows (lone projections, non-square, 14336 x 4096
#    and 32000 x 2048 unsplit)
# 3. fp32 lone projections off the list at 9 and 16 rows
# 4. the fp32 tests of test_decode_plan on the GPU (the accuracy test includes the
#    weight-left tile: it passed in session 100's call 8; the candidates test samples the
#    fp32 weight-left tiles `tilegraph tune` now times) and the fp32 layer-stack tests
# If anything loses: raise the bound or narrow the rule, commit, notes/kernels.md.
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session100/fp32-weight-left.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
W=1536,1664,2560,6144
t 1-stacks-tree 80 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths $W --rows 6,8,16 --out /tmp/s1 --format md,json
t 2-stacks-before 80 /tmp/B/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths $W --rows 6,8,16 --out /tmp/s2 --format md,json
t 3-grid-tree 70 $PWD/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8,16 --out /tmp/g3 --format md,json
t 4-grid-before 70 /tmp/B/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8,16 --out /tmp/g4 --format md,json
S=3072x2048,9728x896,6144x4096,1536x8960,17920x1536,3000x1000
t 5-offlist-tree 45 $PWD/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 9,16 --shapes $S
t 6-offlist-before 45 /tmp/B/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 9,16 --shapes $S
t 7-tests 150 $PWD/src python3 -m pytest -q tests/test_decode_plan.py tests/test_layerstack.py tests/test_decode_stack.py -k "fp32 or float32 or tf32 or rule_by_rows or candidates_are_correct" -p no:cacheprovider

# Written in session 100 for the next session, not run: about 8 minutes.
# research/fp32_weight_left.diff: fp32 (tf32x3) tensor-core tiles with the weight on the
# mma's left (wgmma) wherever their programs fill the SMs (decode_plan.fp32_weight_left_config).
# Session 100's call 7 forced them on stacks: d = 3584 at 6 rows 426 -> 364-369 us, d = 4096
# at 12 rows 482 -> 420, d = 2048 at 8 rows 173 -> 166, d = 1024 at 16 rows 185 -> 224 (the
# rule in the diff keeps d = 1024 off it). Untimed: d = 1280 (160 programs), 8192, 5-8 rows
# past the row loop's bound, non-square shapes, lone projections (5632 x 2048, 2048 x 5632,
# 14336 x 4096 unsplit, 32000 x 2048), fp32 tg.Llama.
# 1. the fp32 stack grid at 6-16 rows, the tree against the tree with the diff (/tmp/B)
# 2. issue 17's fp32 grid at 8 and 16 rows, both trees
# 3. the fp32 tests of test_decode_plan on the GPU with the diff (its accuracy test adds the
#    weight-left tile at tf32x3 and IEEE)
# If the diff wins (stacks and grid) and the tests pass: git apply it, commit, notes.
set -u
mkdir -p /tmp/B && cp -r src tests /tmp/B/ && (cd /tmp/B && patch -p1 < $OLDPWD/research/fp32_weight_left.diff) > $OUT/0-apply.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
W=1024,1280,2048,3584,4096,8192
t 1-stacks-tree 110 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths $W --rows 6,8,12,16 --out /tmp/s1 --format md,json
t 2-stacks-diff 110 /tmp/B/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths $W --rows 6,8,12,16 --out /tmp/s2 --format md,json
t 3-grid-tree 80 $PWD/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8,16 --out /tmp/g3 --format md,json
t 4-grid-diff 80 /tmp/B/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8,16 --out /tmp/g4 --format md,json
t 5-tests-diff 150 /tmp/B/src python3 -m pytest -q /tmp/B/tests/test_decode_plan.py -k "fp32 or tf32 or rule_by_rows or every_candidate" -p no:cacheprovider

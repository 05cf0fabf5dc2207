# Session 103, call 5 (about 4.5 minutes): fp32's weight-left tile at five stages
# (FP32_WEIGHT_LEFT_STAGES; five-stages.patch), checked.
# 1. the fp32 GPU tests of the kernels it touches (session 102's subset).
# 2. issue 17's fp32 stacks at 8 rows with 1536 and 6144 beside them (call 3: the tree
#    before, 1024-8192).
# 3-4. issue 17's fp32 grid of lone projections at 8 and 16 rows, tree and before
#    (five-stages.patch reverse-applied).
set -u
R=results/2026-12-04-session103
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -s -R -p1 < $OLDPWD/$R/five-stages.patch)
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-tests 50 $PWD/src python3 -m pytest -q -x tests/test_decode_plan.py tests/test_norm_handoff.py tests/test_layerstack.py tests/test_decode_stack.py -k "(weight_left or fp32 or float32 or tf32 or rule_by_rows) and not candidates" -p no:cacheprovider
t 2-stacks 60 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 1024,1536,2048,4096,6144,8192 --rows 8 --out /tmp/s2 --format md
t 3-grid-tree 70 $PWD/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8,16 --out /tmp/g3 --format md
t 4-grid-before 70 /tmp/B/src python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8,16 --out /tmp/g4 --format md

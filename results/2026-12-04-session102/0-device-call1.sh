# Session 102 call 1 (written in session 101; stage limits 200/200, then the GPU tests
# that touch session 101's refactor of the fp32 weight-left tile, 170 s).
# 1. Whole fp32 stacks: the two points where session 100's weight-left rule lost (d = 1664
#    at 6 rows, 1.58 programs an SM; d = 2560 at 16, 1.82) and the slowest point of the
#    fp32 stack grid (d = 6144 at 6 rows, 1.10x the hand graph, 45% of the floor; 96 column
#    blocks split 2 give 1.45 an SM, so it keeps the x-left tile): the weight-left tile at
#    splits 2-8 and four stages, the x-left tile, forced (research/stack_plans.py; the
#    rule's own plan runs too).
# 2. Lone fp32 projections below and near the bound (research/probe_fp32_fill.py): x-left
#    against the weight-left tile at every split that launches 0.9-3.1 programs an SM.
# If the weight-left tile wins below 1.5 an SM on both (large K, 6144 or 12288 outputs),
# lower or reshape FP32_WEIGHT_LEFT_MIN_FILL; if a split the rule does not reach wins both,
# change fp32_weight_left_config's split (notes/kernels.md, session 101).
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
T=32/128/3/0,64/64/3/2/4/0/1,64/64/3/3/4/0/1,64/64/3/4/4/0/1,64/64/3/6/4/0/1,64/64/3/8/4/0/1,64/64/4/8/4/0/1
t 1-stack-plans 200 python3 research/stack_plans.py fp32 1664x6,2560x16,6144x6 $T
t 2-fp32-fill 200 python3 research/probe_fp32_fill.py --rows 6,16
t 3-tests 170 python3 -m pytest -q -x --durations=0 tests/test_decode_plan.py tests/test_norm_handoff.py -k "weight_left or fp32 or float32 or rule_by_rows" -p no:cacheprovider

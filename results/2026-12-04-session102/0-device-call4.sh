# Session 102 call 4: where fp32's x-left tile is left after the doubled split, 24 column
# blocks or fewer at split 8 (N <= 1536, 1.45 an SM or less). Lone 1536^2 ran faster on
# the weight-left tile at split 8 in call 1 (7.70 -> 6.83 us at 6 rows), 1280^2 (1.21) and
# 1024^2 (0.97) slower; whole stacks lost at d = 1280 in session 100. Here stacks at d =
# 1408 (22 blocks, 1.33), 1472 (23, 1.39) and 1536 (1.45), x-left against weight-left split
# 8 at three and four stages, and the same lone shapes.
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-stack-plans 170 python3 research/stack_plans.py fp32 1408x6,1472x16,1536x6,1536x16 32/128/3/0,64/64/3/8/4/0/1,64/64/4/8/4/0/1
t 2-fp32-fill 60 python3 research/probe_fp32_fill.py --rows 6,16 --shapes 1408x1408,1472x1472,1536x1536,1536x4096

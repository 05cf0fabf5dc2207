# Session 99, call 4 (about 4 minutes): where fp32 at 5-8 rows should leave the CUDA-core row
# loop for the tensor cores (tf32x3). The rule switches at 2M weight values; session 54 saw
# the tensor cores win at d = 1280 (1.6M) and lose at 1024 (1.05M), and call 2's off-list
# stacks had d = 1280 at 6 rows on the row loop (183 us) slower than at 12 rows on the tensor
# cores (158). Whole fp32 stacks, each plan forced: rule, row loop (8/4/2 rows a program),
# the tensor-core rule tile.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 10-stack-plans-fp32 230 python3 research/stack_plans.py fp32 1280x6,1152x6,1408x6,1152x8,1536x5,1024x6,3584x6,896x6 short

# Session 104 call 2: the tensor-core tile asking L2 for more of its slice before PDL's wait
# (_dot_rows_kernel's L2_TILES, forced; 0 = the rule as it is).
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
# 1. whole fp32 stacks at 8 rows: the rule's weight-left tile (split about two an SM), L2 tiles 0-16
t 1-stacks-fp32 150 python3 research/stack_plans.py fp32 2048x8,4096x8 64/64/5/0/4/0/1/0,64/64/5/0/4/0/1/1,64/64/5/0/4/0/1/2,64/64/5/0/4/0/1/4,64/64/5/0/4/0/1/8,64/64/5/0/4/0/1/16
# 2. whole bf16 stacks at 8 rows
t 2-stacks-bf16 90 python3 research/stack_plans.py bf16 4096x8,8192x4 64/128/3/0/4/0/1/0,64/128/3/0/4/0/1/2,64/128/3/0/4/0/1/4,64/128/3/0/4/0/1/8
# 3-4. lone projections, rule against L2 tiles, PDL chains over rotated weights
t 3-lone-bf16 120 python3 research/probe_l2_slice.py --dtype bf16 --rows 4,16 --rounds 3
t 4-lone-fp32 100 python3 research/probe_l2_slice.py --dtype fp32 --rows 8 --rounds 3 --shapes 2048x2048,4096x4096,14336x4096,6144x6144,5632x2048,2048x5632
cd $OUT && tar czf all.tgz *.txt && rm *.txt

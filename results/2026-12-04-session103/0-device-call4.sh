# Session 103, call 4 (about 6 minutes): fp32 stacks at issue 17's widths at 8 rows read 39%
# (d = 2048) and 61% (4096) of the floor in call 3, 65% asked. The weight-left tile's
# pipeline forced on them (research/stack_plans.py; BLOCK_N/BLOCK_K/stages/split/warps/
# maxnreg/W_LHS, split 0 = about two programs an SM): the rule's (64/64/3), four and five
# stages, BLOCK_K 32 at six and eight stages (the same or more bytes in flight in finer
# steps), BLOCK_K 128 at two, eight warps, and split 8.
set -u
export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-1 TRITON_CACHE_DIR=/tmp/tr-1
T=64/64/3/0/4/0/1,64/64/4/0/4/0/1,64/64/5/0/4/0/1,64/32/6/0/4/0/1,64/32/8/0/4/0/1,64/128/2/0/4/0/1,64/64/3/0/8/0/1,64/64/3/8/4/0/1
{ echo "\$ stack_plans.py fp32 2048x8,4096x8,8192x8 $T"; timeout 330 python3 research/stack_plans.py fp32 2048x8,4096x8,8192x8 $T; echo "rc=$?"; } > $OUT/1-stack-plans.txt 2>&1

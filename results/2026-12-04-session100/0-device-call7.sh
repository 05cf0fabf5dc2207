# Session 100 call 7: fp32 tensor-core tiles with the weight on the mma's left (W_LHS:
# wgmma, 123-155 registers at BLOCK_K 64 against the rule's x-left mma.sync at 189-248,
# compiled for sm_90 here: research/decode_kernel_registers.py --dtype fp32) forced onto
# whole fp32 LayerStacks (research/stack_plans.py; split 0 = about two programs an SM).
set -u
export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-c7 TRITON_CACHE_DIR=/tmp/tr-c7
{ echo "\$ python3 research/stack_plans.py fp32 3584x6,2048x8,4096x12,1024x16 64/64/3/0/4/0/1,64/64/4/0/4/0/1,64/32/4/0/4/0/1"
  timeout 280 python3 research/stack_plans.py fp32 3584x6,2048x8,4096x12,1024x16 64/64/3/0/4/0/1,64/64/4/0/4/0/1,64/32/4/0/4/0/1; echo "rc=$?"; } > $OUT/15-stack-plans-fp32-wlhs.txt 2>&1

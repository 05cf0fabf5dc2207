# Written in session 104 for the next session, not run: about 9.7 minutes (stage limits
# 110/110/130/170/60). fp32 at 5-8 rows on weights under 2M values runs the CUDA-core row loop,
# whose 8 rows compile to 87 barriers at 4 warps a program (sm_90, Triton 3.6): d = 1024 at 8
# rows costs 4.8 us a projection against 2.2 at one row, 20.8% of the floor (65% asked).
# 1. the row loop in programs of one or two warps (stack_plans.py rowloop: 2/1/1024 has no
#    barrier at 186 registers), whole fp32 stacks against the rule.
# 1b. the same with research/row_loop_gathered.diff applied (the rows' sums over K gathered
#    (BN, BM) and turned to the accumulator's layout once a step: 87 -> 57 barriers at 4
#    warps, 1 at one warp; CPU tests of the row loop pass with it).
# 2. `tilegraph demo --model DIR` tests on the GPU (session 104's 45 s limit cut them off;
#    33 s on CPU).
# 3. TinyLlama fp32 at batch 8 (session 103: 1.830 ms a token, 53.3%; before the stage rule
#    and the L2 tiles; session 104's 130 s limit cut it off in the prefill capture).
# 4. fp32's x-left split tile with and without its next tile asked of L2 (the default since
#    session 104, timed there on weight-left plans only): d = 1280 and 1408 (split 6, two
#    tiles a slice) at 16 and 9 rows.
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-rowloop 110 python3 research/stack_plans.py fp32 1024x8,768x8,1280x6 rowloop
mkdir -p /tmp/G && cp -r src /tmp/G/ && (cd /tmp/G && patch -s -p1 < $OLDPWD/research/row_loop_gathered.diff)
t2() { name=$1; limit=$2; shift 2
  export PYTHONPATH=/tmp/G/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t2 1b-rowloop-gathered 110 python3 research/stack_plans.py fp32 1024x8,768x8,1280x6 rowloop
t 2-tests-demo-dir 130 python3 -m pytest -q tests/test_cli.py tests/test_model_demo.py -k "checkpoint or demo_model or score_keeps" -p no:cacheprovider
t 3-demo-fp32-b8 170 python3 -m tilegraph demo --model tinyllama --dtype fp32 --batch 8 --variants tilegraph --no-sweeps --new-tokens 32 --prompt-tokens 32 --max-seq 128 --out /tmp/d3
t 4-x-left-l2 60 python3 research/stack_plans.py fp32 1280x16,1408x9 32/128/3/0/4/0/0/0,32/128/3/0/4/0/0/1
cd $OUT && tar czf all.tgz *.txt && rm *.txt

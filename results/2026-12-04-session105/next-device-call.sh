# Written in session 105 for the next session, not run: about 11 minutes (limits
# 90/60/120/60/150/90/120: drop 5, or run it in a second call). Session 105 gathered the row
# loop's per-row sums once a step (GATHER_ROWS) at 2 and 5-8 rows; at 3-4 rows (BLOCK_M 4,
# BLOCK_N 8, BLOCK_K up to 2048: 242-255 registers) gathering split gains and losses (lone
# fp32 4096 x 14336 at 4 rows 87% -> 76% of copy, d = 1024 stacks 3.5% faster, d = 768 3.5%
# slower), so 3-4 rows keep the row-by-row turn, and plain projections there time both.
# 1. GPU tests of the row loop after 0f1e1ee (its two turns in one loop: the same sm_90 PTX
#    but debug info, checked on CPU) and of the plans tune and plain_plan time (both turns).
# 2. lone fp32 at 3 and 4 rows: the rule's tile (turned, BLOCK_K 2048) against gathered, and
#    both at BLOCK_K 1024 (half the weight tile's registers); sweep_dot_rows.py runs configs
#    with ROW_LOOP on the row loop since session 105. The suspect (sm_90 SASS,
#    `decode_kernel_registers.py --dtype fp32 --row-loop 4:8:2048:G`): gathered, the residual
#    role at 246 registers issues 4 of its K loop's 48 loads after the step's first reduction
#    (turned: none), so each step of a long row waits for them; at BLOCK_K 1024, 2 of 24.
# 3. the same on fp32 stacks at 3-4 rows (stack_plans.py rowloop: matvecT / matvecG at the
#    rule's BLOCK_K and half).
# 4. bf16 stacks at 3-4 rows on small weights (the row loop's 16-bit share).
# 5. issue 17's bf16 grid at 1, 2 and 8 rows (not rerun whole since session 104's L2 tiles).
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-tests 90 python3 -m pytest -q -m gpu tests/test_linear.py tests/test_decode_plan.py -k "row_loop or block_shapes or swiglu or candidates or plain" -p no:cacheprovider
# 1b. plain projections at 3-4 rows time the row loop's two turns since 31d4d74 (plain_plan,
#     other_plan): issue 17's fp32 grid at 3 and 4 rows, which plain tg.linear runs
t 1b-grid-fp32-3-4 60 python3 -m tilegraph bench decode-grid --dtype fp32 --rows 3,4 --out /tmp/o1b
T='{"BLOCK_N": 8, "BLOCK_K": 2048, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
H='{"BLOCK_N": 8, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
t 2-lone-4rows 120 python3 research/sweep_dot_rows.py --out /tmp/o2 --dtype float32 --rows 3 4 \
  --shapes 4096 14336 8192 8192 2048 2048 5632 2048 14336 4096 1024 1024 \
  --tiles "[$T, \"GATHER_ROWS\": false}, $T, \"GATHER_ROWS\": true}, $H, \"GATHER_ROWS\": false}, $H, \"GATHER_ROWS\": true}]"
cp /tmp/o2/sweep-dot-rows.json $OUT/2-lone-4rows.json 2>/dev/null
# 2b. 6 and 8 rows where the row loop's K loop runs (narrow, long rows: tile weights under 2M),
#     where the gathered residual role issues 10 of its 24 loads after the step's first
#     reduction (decode_kernel_registers.py --dtype fp32 --row-loop 8:4:1024:G)
E='{"BLOCK_N": 4, "BLOCK_K": 2048, "num_warps": 4, "num_stages": 1, "ROW_LOOP": true'
t 2b-lone-8rows 60 python3 research/sweep_dot_rows.py --out /tmp/o2b --dtype float32 --rows 6 8 \
  --shapes 96 14336 200 8192 \
  --tiles "[$E, \"GATHER_ROWS\": false}, $E, \"GATHER_ROWS\": true}]"
cp /tmp/o2b/sweep-dot-rows.json $OUT/2b-lone-8rows.json 2>/dev/null
t 3-stacks-fp32 150 python3 research/stack_plans.py fp32 768x4,1024x4,1280x4,1024x3 rowloop
t 4-stacks-bf16 90 python3 research/stack_plans.py bf16 768x4,1024x3,1280x4 rowloop
t 5-grid-bf16 120 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 1,2,8 --out /tmp/o5
cd $OUT && tar czf all.tgz *.txt *.json && rm *.txt *.json

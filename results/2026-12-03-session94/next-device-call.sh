# Written in session 94 for the next session, not run: call 1 of 2, about 8-9 minutes.
# The tensor-core decode kernel with its K loop compiled out where every slice of K is one
# step (_dot_rows.COMPILE_ONE_STEP, off by default until this is timed): 171 -> 64
# registers a thread for 2048^2's whole-slice tile (sm_90, Triton 3.6, compiled here).
# 1. research/probe_one_step.py: loop kept / out / cuBLAS on the rule's one-step plans.
# 2. The bf16 stack grid at d = 1024 and 2048, batches 4-16, kept and out (separate
#    processes and caches), out again: issue 17's stacks, where session 38's other register
#    cut (TMA) lost.
# 3. The GPU tests of the tensor-core kernel with the setting on.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-probe-one-step 200 python3 research/probe_one_step.py --rounds 3
stacks() { t $1 80 python3 -c "import sys; from tilegraph.kernels import _dot_rows; _dot_rows.COMPILE_ONE_STEP = sys.argv[1] == '1'; from tilegraph.cli import main; sys.exit(main(sys.argv[2:]))" $2 bench stack-grid --dtype bf16 --widths 1024,2048 --rows 4,8,16 --out /tmp/$1 --format md,json; }
stacks 2-stacks-kept 0
stacks 3-stacks-out 1
stacks 4-stacks-kept-again 0
t 5-gpu-tests-one-step 130 python3 -c "import sys, pytest; from tilegraph.kernels import _dot_rows; _dot_rows.COMPILE_ONE_STEP = True; sys.exit(pytest.main(['-m', 'gpu', '-q', '-x', 'tests/test_linear.py', 'tests/test_decode_plan.py', '-k', 'split or norm or dot or plain']))"
tar czf $OUT/extra.tgz -C /tmp 2-stacks-kept 3-stacks-out 4-stacks-kept-again 2>/dev/null

# Written in session 94 for the next session, not run: call 1 of 2, about 8-9 minutes.
# K loops that a launch never runs, compiled out (off by default until timed; compiled here
# for sm_90 with Triton 3.6): the tensor-core kernel where every slice of K is one step
# (_dot_rows.COMPILE_ONE_STEP: 171 -> 64 registers a thread for 2048^2's whole-slice tile)
# and the one-row GEMV's split tile where the row fits its first tile
# (_matvec.COMPILE_ONE_TILE: 127-128 -> 86-96 at 2048 columns, 76-91 -> 48-61 at 896), and
# attention's run loop where every run fits its preloaded tiles
# (decode_attention.COMPILE_PRELOADED_RUNS: 100 -> 80 at preload 2, 8 warps, heads of 64).
# 1. research/probe_one_step.py: loop kept / out / cuBLAS on the rule's plans.
# 2. The bf16 stack grid at d = 1024 and 2048, batches 1-16, loops kept and out (separate
#    processes and caches): issue 17's stacks, where session 38's other register cut (TMA)
#    lost.
# 3. The GPU tests of the three kernels with the settings on.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-probe-loops-out 190 python3 research/probe_one_step.py --shapes 2048x2048,256x2048,1152x896,896x896,1536x1536 --rows 1,8,16 --rounds 3
SET="import sys; from tilegraph.kernels import _dot_rows, _matvec, decode_attention as a; _dot_rows.COMPILE_ONE_STEP = _matvec.COMPILE_ONE_TILE = a.COMPILE_PRELOADED_RUNS = sys.argv[1] == '1'"
stacks() { t $1 85 python3 -c "$SET; from tilegraph.cli import main; sys.exit(main(sys.argv[2:]))" $2 bench stack-grid --dtype bf16 --widths 1024,2048 --rows 1,4,8,16 --out /tmp/$1 --format md,json; }
stacks 2-stacks-kept 0
stacks 3-stacks-out 1
t 4-gpu-tests-loops-out 140 python3 -c "$SET; import pytest; sys.exit(pytest.main(['-m', 'gpu', '-q', '-x', 'tests/test_linear.py', 'tests/test_decode_plan.py', 'tests/test_decode_attention.py', '-k', 'split or norm or dot or plain or gemv or persistent or preload']))" 1
tar czf $OUT/extra.tgz -C /tmp 2-stacks-kept 3-stacks-out 2>/dev/null

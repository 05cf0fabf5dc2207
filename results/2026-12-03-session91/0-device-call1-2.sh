# Written in session 90 for the next session (not run: session 90 had no device time).
# Supersedes session 89's next-device-call.sh (its sweep is part 2's).
# research/small_tiles_step.diff: the batch-1 step tuner also offers SMALL_LAUNCH (16 KB
# persistent tiles over 4 warps, widened: 59-64 registers, 8 programs an SM) to one-row
# projections of 1 MiB or more whose rows have at most 2048 columns (Qwen2-0.5B's q|k|v,
# output and gate/up; TinyLlama's q|k|v, output and gate/up; the d1024-h128 shape's q|k|v and
# gate/up). Alone, Qwen2-0.5B's gate/up took 5.48 us in such tiles against the rule's
# 6.16-6.72 (session 89, file 4). Two calls, each under 10 minutes with a fresh start:
#   bash results/2026-12-02-session90/next-device-call.sh 1   # landed tree: session 90's
#        changed tests (rope "linear" on the GPU, the step tuners' modeled clock), Generators
#   bash results/2026-12-02-session90/next-device-call.sh 2   # the diff: its GPU tests, the
#        same Generators (the step's candidates printed), the sweep of Qwen2-0.5B alone
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
models=qwen2-0.5b,tinyllama,d1024-h128
if [ "${1:-1}" = 1 ]; then
  t 1-gpu-tests-landed 90 python3 -m pytest -q tests/test_llama.py tests/test_decode_plan.py -k "linear_rope or chosen_in_the_step or other_launch or tuned_plans"
  t 2-generator-old 300 python3 research/time_generator.py old $models
else
  git apply research/small_tiles_step.diff || exit 1
  t 3-gpu-tests-small 150 python3 -m pytest -m gpu -q tests/test_linear.py tests/test_decode_plan.py tests/test_generate.py -k "small or gemv_rows_are_chosen or other_launch or widens"
  t 4-generator-small 300 python3 research/time_generator.py small $models
  t 5-sweep-qwen-small 90 python3 research/sweep_gemv.py --out /tmp/sweep5 --persistent --widen --rows 1 --only qwen2-0.5b
  cd /tmp && tar czf $OUT/extra.tgz sweep5 2>/dev/null
fi

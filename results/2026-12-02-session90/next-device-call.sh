# written in session 90 for the next session (not run; session 90 had no device time).
# Supersedes session 89's next-device-call.sh, which it contains (the sweep).
# Qwen2-0.5B-class steps (rows of <= 1024 columns) with research/small_tiles_step.diff: the
# step tuner offers SMALL_LAUNCH (16 KB persistent tiles over 4 warps, widened, up to 8 an SM)
# to q|k|v, output and gate/up. Old tree first, then the diff's GPU tests, the sweep of
# Qwen2-0.5B's projections alone (session 89: gate/up 5.48 us in such tiles against the
# rule's 6.16-6.72) and the same Generators on the new tree. First, on the landed tree, the
# tests session 90 changed (rope scaling "linear" on the GPU; the step tuners' modeled
# clock). ~8-9 min with a fresh start.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 0-gpu-tests-landed 60 python3 -m pytest -q tests/test_llama.py tests/test_decode_plan.py -k "linear_rope or chosen_in_the_step or other_launch or tuned_plans"
t 1-generator-old 150 python3 research/time_generator.py old qwen2-0.5b,d1024-h128
git apply research/small_tiles_step.diff || exit 1
t 2-gpu-tests 120 python3 -m pytest -m gpu -q tests/test_linear.py tests/test_decode_plan.py tests/test_generate.py -k "small or gemv_rows_are_chosen or other_launch or widens"
t 3-sweep-qwen 90 python3 research/sweep_gemv.py --out /tmp/sweep3 --persistent --widen --rows 1 --only qwen2-0.5b
t 4-generator-new 150 python3 research/time_generator.py new qwen2-0.5b,d1024-h128
cd /tmp && tar czf $OUT/extra.tgz sweep3 2>/dev/null

# Session 98, call 1 (written in session 97): about 9 minutes. The split-K partials as
# one contiguous tile a program (research/contiguous_partials.diff, 1-3% faster on split plans
# alone and 0-1% in stacks, session 97) checked before it lands:
# 1. the GPU tests it touches, on a copy of src/ with the diff applied;
# 2. tg.Generator, TinyLlama and Qwen2-0.5B at batch 8 (q|k|v, output, down on split plans),
#    as it is / with the diff, in separate processes, each its own caches (one round: repeat
#    it in a second call where the two are within 1%).
# If both hold: `git apply research/contiguous_partials.diff`, commit, and the decode grid.
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -p1 < $OLDPWD/research/contiguous_partials.diff) > $OUT/0-apply.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-gpu-tests-contiguous 270 /tmp/B/src python3 -m pytest -m gpu -q tests/test_linear.py tests/test_linear_qkv.py tests/test_generate.py -k "split or dot or norm or plain or rows or whole_slice or greedy"
for model in tinyllama qwen2-0.5b; do
  t 2-generator-$model-rows 75 $PWD/src python3 research/time_generator.py rows $model 128 2048 8
  t 3-generator-$model-contiguous 75 /tmp/B/src python3 research/time_generator.py contiguous $model 128 2048 8
done
PYTHONPATH=/tmp/B/src python3 -c "import tilegraph; print(tilegraph.__file__)" >> $OUT/0-apply.txt 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv >> $OUT/0-apply.txt 2>&1

# Session 91, call 4: does Qwen2-0.5B gain from small tiles at long contexts, where the step
# tuner timed its gain (positions 255 and 2047)? Prompt 1792, 256 new tokens; old tree
# (/tmp/old, the diff reversed) and the landed one, each once. Then the GPU tests of the
# Generator's step variants on the landed tree.
# research/small_tiles_step.diff is in git at 046e8f1; restore it first:
#   git show 046e8f1:research/small_tiles_step.diff > research/small_tiles_step.diff
set -u
R=$PWD
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
mkdir -p /tmp/old && cp -r src research /tmp/old && (cd /tmp/old && git apply -R --include='src/*' $R/research/small_tiles_step.diff) || exit 1
PYTHONPATH=/tmp/old/src:$R/research t 1-old-qwen-1792 80 python3 research/time_generator.py old qwen2-0.5b 1792
PYTHONPATH=$R/src:$R/research t 2-small-qwen-1792 80 python3 research/time_generator.py small qwen2-0.5b 1792
PYTHONPATH=$R/src t 3-gpu-tests 100 python3 -m pytest -m gpu -q tests/test_generate.py -k "variant or step or small"

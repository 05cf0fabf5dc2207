# Session 91, call 3: research/small_tiles_step.diff applied to the tree (src/); the tree
# before it rebuilt under /tmp/old. Qwen2-0.5B and Llama-3.2-1B's Generators timed old and
# small in turn on one machine; then the b1 TinyLlama demo with small tiles (% of the floor).
# research/small_tiles_step.diff is in git at 046e8f1; restore it first:
#   git show 046e8f1:research/small_tiles_step.diff > research/small_tiles_step.diff
set -u
R=$PWD
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
mkdir -p /tmp/old && cp -r src research /tmp/old && (cd /tmp/old && git apply -R --include='src/*' $R/research/small_tiles_step.diff) || exit 1
old() { PYTHONPATH=/tmp/old/src:$R/research t "$@"; }
new() { PYTHONPATH=$R/src:$R/research t "$@"; }
old 1-old-qwen 90 python3 research/time_generator.py old qwen2-0.5b
new 2-small-qwen 90 python3 research/time_generator.py small qwen2-0.5b
old 3-old-qwen 90 python3 research/time_generator.py old qwen2-0.5b
new 4-small-qwen 90 python3 research/time_generator.py small qwen2-0.5b
old 5-old-llama1b 100 python3 research/time_generator.py old llama3.2-1b
new 6-small-llama1b 100 python3 research/time_generator.py small llama3.2-1b
export PYTHONPATH=$R/src
t 7-demo-tinyllama-b1 120 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo7
cd /tmp && tar czf $OUT/extra.tgz demo7 2>/dev/null

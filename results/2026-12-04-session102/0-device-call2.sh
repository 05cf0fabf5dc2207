# Session 102 call 2: fp32's weight-left split doubled where the split that keeps two
# programs an SM launches fewer than 1.5 an SM (fp32-two-waves.patch): call 1 found d = 6144
# stacks 1.91x faster at split 4 than the rule's x-left tile, and lone projections of 96-192
# column blocks 1.3-1.6x faster at twice the split. Tree against the tree before it (/tmp/B,
# the patch reverse-applied): lone projections, the d = 6144 stack, fp32 GPU tests, and
# TinyLlama's fp32 decode at batch 8 (its gate/up, 11264 x 2048, changes tile).
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session102/fp32-two-waves.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
S=6144x6144,6144x4096,11008x4096,12288x4096,9728x896,11264x2048,8448x8448
t 1-lone-tree 60 $PWD/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 6,16 --shapes $S
t 2-lone-before 60 /tmp/B/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 6,16 --shapes $S
t 3-stack-tree 50 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 6144 --rows 6,16 --out /tmp/s3 --format md,json
t 4-stack-before 50 /tmp/B/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 6144 --rows 6,16 --out /tmp/s4 --format md,json
t 5-tests 90 $PWD/src python3 -m pytest -q -x --durations=10 tests/test_decode_plan.py tests/test_norm_handoff.py tests/test_layerstack.py tests/test_decode_stack.py -k "(weight_left or fp32 or float32 or tf32 or rule_by_rows) and not candidates" -p no:cacheprovider
D="--dtype fp32 --batch 8 --variants hf-graph,tilegraph --no-sweeps --new-tokens 64 --prompt-tokens 64 --max-seq 256"
t 6-tinyllama-tree 140 $PWD/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d1
t 7-tinyllama-before 140 /tmp/B/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d2

#!/bin/bash
# Session 120, call 3 (timeout 560): the added norm's rows loaded with x in _matvec_kernel
# (Gemma 3 1B's q|k|v at batch 2) and the split tiles' norm of h from the row they loaded
# (Gemma 3 1B's q|k|v at batch 1), kernels-since-session-119.diff. The GPU tests of the
# kernels with an added norm and Gemma's model tests; then tg.Generator on this tree against
# the tree before (the diff reversed on a copy): the new tree tunes, the old then the new
# again replay the same choices (one TILEGRAPH_CACHE_DIR a model and batch), so the kernels
# alone differ and the repeat shows the drift.
set -u
DEADLINE=$(( $(date +%s) + 480 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-06-session120
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 250 \
   python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_decode_plan.py \
   tests/test_linear.py tests/test_linear_qkv.py tests/test_llama.py tests/test_generate.py \
   -k "normed or added or gemma"; echo "rc=$?") > $OUT/1-tests.txt 2>&1
rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src research /tmp/A/ \
  && (cd /tmp/A && patch -R -s -p1 < $ROOT/$S/kernels-since-session-119.diff) \
  || echo "patch failed" >> $OUT/2-trees.txt
for run in gemma3-1b:2 gemma3-1b:1; do
  model=${run%:*} batch=${run#*:}
  for tree in $ROOT /tmp/A $ROOT; do
    left "$model b$batch $tree" || continue
    name=$( [ $tree = $ROOT ] && echo s120 || echo s119 )
    (cd $tree && PYTHONPATH=$tree/src TILEGRAPH_CACHE_DIR=/tmp/tg-$run \
       TRITON_CACHE_DIR=/tmp/tr-$name timeout 150 python3 research/time_generator.py $name \
       $model 128 2048 $batch; echo "rc=$?") 2>&1 | grep "ms a token\|rc=\|Error" \
       | cut -c1-200 >> $OUT/2-trees.txt
  done
done
true

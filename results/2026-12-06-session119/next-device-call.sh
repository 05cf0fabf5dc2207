#!/bin/bash
# For session 120's first device call (about 8 minutes; timeout 560): session 119's added
# norms loaded with x (one round trip to L2 in the prologue after PDL's wait, not two), not
# yet on a GPU. The GPU tests of the kernels with an added norm and Gemma's model tests, then
# tg.Generator on this tree against session 118's kernels (kernels-since-session-118.diff
# reversed on a copy), each model and batch in its own process a tree. Then a second call
# with PART=b for batch 8 (and 2), and PART=c for where Gemma 3 1B's steps go now (batch 1
# and 8; session 118: q|k|v 6.6 us exposed at batch 1, the norm kernels 2.2-2.4 at 8).
set -u
DEADLINE=$(( $(date +%s) + 500 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-06-session119 PART=${PART:-a}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
if [ "$PART" = a ]; then
  (PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 240 \
     python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_decode_plan.py \
     tests/test_linear.py tests/test_linear_qkv.py tests/test_llama.py tests/test_generate.py \
     -k "normed or added or gemma"; echo "rc=$?") > $OUT/1-tests.txt 2>&1
fi
if [ "$PART" = c ]; then
  for batch in 1 8; do
    (PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-p TRITON_CACHE_DIR=/tmp/tr-p timeout 200 \
       python3 research/profile_llama_decode.py --model gemma3-1b --batch $batch; echo "rc=$?") \
      > $OUT/3-profile-gemma3-1b-b$batch.txt 2>&1
  done
  exit 0
fi
rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src research /tmp/A/ \
  && (cd /tmp/A && patch -R -s -p1 < $ROOT/$S/kernels-since-session-118.diff) \
  || echo "patch failed" >> $OUT/2-trees-$PART.txt
if [ "$PART" = a ]; then runs="gemma3-1b:1 gemma2-2b:1"; else runs="gemma3-1b:8 gemma2-2b:2"; fi
for run in $runs; do
  model=${run%:*} batch=${run#*:}
  for tree in $ROOT /tmp/A; do
    left "$model b$batch $tree" || continue
    name=$( [ $tree = $ROOT ] && echo s119 || echo s118 )
    (cd $tree && PYTHONPATH=$tree/src TILEGRAPH_CACHE_DIR=/tmp/tg-$name-$run \
       TRITON_CACHE_DIR=/tmp/tr-$name timeout 150 python3 research/time_generator.py $name \
       $model 128 2048 $batch; echo "rc=$?") 2>&1 | grep "ms a token\|rc=\|Error" >> $OUT/2-trees-$PART.txt
  done
done
true

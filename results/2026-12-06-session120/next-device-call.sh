#!/bin/bash
# For session 121's first device call (timeout 560): where Gemma 3 1B's decode steps go on
# this tree (research/profile_llama_decode.py: kernels of an eager step, a graph replay's
# timeline, tg.Generator's graph), batch 1 and 8. The question for batch 8 (3-16 rows take the
# tensor-core kernel): what the norm kernels that make Gemma's added norms before q|k|v and
# gate/up cost a layer now (session 118: 2.2-2.4 us each, two a layer), which a handoff of
# h's sums of squares from the projection that writes h, and the norm in the q|k|v kernel's
# loop, would take out of the chain (notes/models.md, session 120). PART=b: Gemma 2 2B at
# batch 1 and 2 on this tree against session 119's kernels (kernels-since-session-119.diff
# reversed), one tuning replayed by both.
set -u
DEADLINE=$(( $(date +%s) + 500 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-06-session120 PART=${PART:-a}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
if [ "$PART" = a ]; then
  for batch in 8 1; do
    left "profile b$batch" || continue
    (PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-p TRITON_CACHE_DIR=/tmp/tr-p timeout 230 \
       python3 research/profile_llama_decode.py --model gemma3-1b --batch $batch; echo "rc=$?") \
      > $OUT/1-profile-gemma3-1b-b$batch.txt 2>&1
  done
  exit 0
fi
rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src research /tmp/A/ \
  && (cd /tmp/A && patch -R -s -p1 < $ROOT/$S/kernels-since-session-119.diff) \
  || echo "patch failed" >> $OUT/2-trees.txt
for run in gemma2-2b:1 gemma2-2b:2; do
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

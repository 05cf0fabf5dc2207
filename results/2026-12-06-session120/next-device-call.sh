#!/bin/bash
# For session 121's first device call (timeout 560). Session 120 (last, CPU only): at 3-16
# rows Gemma's residual projections hand their outputs' sums of squares to the projection
# that adds them normed, which makes the stream in its K loop instead of after a norm kernel
# (llama.POST_NORM_SUMS_HANDED_OVER). First the GPU tests of that path and Gemma's model
# tests; then tg.Generator with it ("bands") and without ("post-sums-apart"), in one process a
# model and batch (the second replays the first's choices): Gemma 3 1B at batch 8, and at
# batch 4 (PART=b, with its profile at batch 8; PART=c its profile at batch 1). Gemma 2 2B
# and Gemma 3 4B take pipelined q|k|v plans at 3-16 rows, where the stream is not made in
# the loop (linear.makes_stream_in_loop): nothing to time there.
# If it loses or fails, set POST_NORM_SUMS_HANDED_OVER = False or revert the commits.
set -u
DEADLINE=$(( $(date +%s) + 500 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD PART=${PART:-a}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
variants() {  # model batch: with and without the handoff, one process
  left "$1 b$2" || return
  (PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-$1-$2 TRITON_CACHE_DIR=/tmp/tr \
     timeout 200 python3 research/time_generator.py s120 $1 128 2048 $2 \
     bands,post-sums-apart,bands; echo "rc=$?") 2>&1 | grep "ms a token\|rc=\|Error" \
     | cut -c1-200 >> $OUT/2-variants.txt
}
profile() {  # batch
  left "profile b$1" || return
  (PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-p TRITON_CACHE_DIR=/tmp/tr-p timeout 230 \
     python3 research/profile_llama_decode.py --model gemma3-1b --batch $1; echo "rc=$?") \
    > $OUT/3-profile-gemma3-1b-b$1.txt 2>&1
}
if [ "$PART" = a ]; then
  (PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 300 \
     python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_decode_plan.py \
     tests/test_linear.py tests/test_linear_qkv.py tests/test_norm_handoff.py \
     tests/test_llama.py tests/test_generate.py \
     -k "normed or added or gemma or post_norm or made_in_the_loop"; echo "rc=$?") \
    > $OUT/1-tests.txt 2>&1
  variants gemma3-1b 8
elif [ "$PART" = b ]; then
  variants gemma3-1b 4
  profile 8
else
  profile 1
fi
true

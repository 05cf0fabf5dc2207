#!/bin/bash
# Session 116, for the next device call (run: bash results/2026-12-05-session116/device-call.sh,
# timeout 590). No machine was lent in session 116, so this carries its checks and session
# 115's unrun call:
#   1. the GPU tests of session 116's changes: tg.rms_norm launched with PDL (its own tests,
#      the 200-replay decode test now also at Gemma 2's layout), the Gemma tests (the tiny
#      Gemma 1 now built with the tanh GELU that transformers 5.17 ran exact);
#   2. tg.Generator at Gemma 3 1B's and Gemma 2 2B's shapes, batch 1, with the norms' PDL
#      and without (research/time_generator.py variants bands,norm-no-pdl);
#   3. session 115's parts a and b (the HF hand graph at Gemma's shapes, Qwen3's tests,
#      session 111's patches, the family tests, Phi-3-mini's demo), while time is left.
# Everything lands in one archive, $OUT/results.tgz (at most 8 files come back).
set -u
export DEADLINE=$(( $(date +%s) + 520 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD
FINAL=$OUT
export OUT=/tmp/out116 && rm -rf $OUT && mkdir -p $OUT
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-116 TRITON_CACHE_DIR=/tmp/tr-116 "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
left tests-116 && (run timeout 170 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_rms_norm.py tests/test_llama.py tests/test_generate.py tests/test_decode_plan.py -k "pdl or replays or gemma or residual or large_gpu"; echo "rc=$?") > $OUT/1-tests-116.txt 2>&1
left time-gemma && (run timeout 200 python3 research/time_generator.py s116 gemma3-1b,gemma2-2b 128 2048 1 bands,norm-no-pdl; echo "rc=$?") > $OUT/2-time-gemma.txt 2>&1
bash results/2026-12-05-session115/device-call-a.sh
bash results/2026-12-05-session115/device-call-b.sh
tar -czf $FINAL/results.tgz -C $OUT .
cp $OUT/1-tests-116.txt $OUT/2-time-gemma.txt $OUT/skipped.txt $FINAL/ 2>/dev/null
true

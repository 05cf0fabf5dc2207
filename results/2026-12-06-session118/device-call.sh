#!/bin/bash
# Session 118's first device call (about nine minutes; run with timeout 590): the GPU checks
# sessions 116 and 117 left, then where Gemma 3 1B's batch-1 step goes. Each part writes its
# own file into $OUT as it ends (at most 8 come back); none starts after 470 s (listed in
# skipped.txt).
#   1a. GPU tests of session 116's prologue add and of the head norms in the q|k|v
#       projection's epilogue (session 117's one-row GEMV, session 118's row and tensor-core
#       kernels; 3 workers: the real shapes need the memory of an H100);
#   1b. the model tests through them (replays, Gemma, Qwen3, LongRoPE);
#   2.  tg.Generator at Gemma 3 1B's and Qwen3-0.6B's shapes, batch 1, heads normalised in
#       the projection's epilogue and apart (research/time_generator.py);
#   3.  research/profile_llama_decode.py --model gemma3-1b --batch 1;
#   2b. the same as 2 at Qwen3-0.6B's shape, batch 8 (session 118's tensor-core epilogue).
set -u
DEADLINE=$(( $(date +%s) + 470 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
run() { PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
left kernel-tests && (run timeout 100 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_linear_qkv.py tests/test_rotary.py tests/test_decode_plan.py tests/test_linear.py -k "normed or head_norm or qwen3 or linear_qkv or rotary"; echo "rc=$?") > $OUT/1a-kernel-tests.txt 2>&1
left model-tests && (run timeout 160 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_llama.py tests/test_generate.py -k "replays or gemma or longrope or qwen3"; echo "rc=$?") > $OUT/1b-model-tests.txt 2>&1
left head-norms && (run timeout 150 python3 research/time_generator.py s118 gemma3-1b,qwen3-0.6b 128 2048 1 bands,head-norms-apart; echo "rc=$?") > $OUT/2-head-norms.txt 2>&1
left profile && (run timeout 150 python3 research/profile_llama_decode.py --model gemma3-1b --batch 1; echo "rc=$?") > $OUT/3-profile-gemma3-1b.txt 2>&1
left head-norms-b8 && (run timeout 150 python3 research/time_generator.py s118 qwen3-0.6b 128 2048 8 bands,head-norms-apart; echo "rc=$?") > $OUT/2b-head-norms-b8.txt 2>&1
true

#!/bin/bash
# Session 117's device call cut to the device time left (each part's file written into $OUT
# as it ends, so a run stopped at its limit still returns the parts before): the GPU tests
# of the head norms in the one-row q|k|v epilogue and of session 116's prologue add, then
# tg.Generator at Gemma 3 1B's and Qwen3-0.6B's shapes with the head norms there and apart,
# then the Qwen3 and Gemma 3 model tests.
set -u
ROOT=$PWD
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(run timeout 100 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_linear_qkv.py tests/test_rotary.py tests/test_decode_plan.py tests/test_linear.py -k "normed or head_norm or qwen3 or linear_qkv or rotary"; echo "rc=$?") > $OUT/1a-kernel-tests.txt 2>&1
(run timeout 150 python3 research/time_generator.py s117 gemma3-1b,qwen3-0.6b 128 2048 1 bands,head-norms-apart; echo "rc=$?") > $OUT/2-head-norms.txt 2>&1
(run timeout 150 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_llama.py tests/test_generate.py -k "replays or gemma3 or qwen3"; echo "rc=$?") > $OUT/1b-model-tests.txt 2>&1
true

#!/bin/bash
# Session 115, first call of two: Qwen3 (session 112's tests), transformers' hand-captured
# graph at Gemma 2 2B's and Gemma 3 1B's shapes, session 111's prepared fixes on a patched
# copy.
set -u
# DEADLINE (epoch seconds, optional): parts that would start after it are skipped
left() { [ "$(date +%s)" -lt "${DEADLINE:-9999999999}" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-05-session115 S111=results/2026-12-04-session111
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-a TRITON_CACHE_DIR=/tmp/tr-a "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
for spec in "gemma2-2b 1" "gemma3-1b 1" "gemma3-1b 8"; do set -- $spec
  left "hf-graph $1 $2" && { echo "\$ tilegraph demo --model $1 --batch $2 --variants hf-eager,hf-graph --no-sweeps"
    COLUMNS=200 run timeout 60 python3 -m tilegraph demo --model $1 --batch $2 --variants hf-eager,hf-graph --no-sweeps --out /tmp/demo-$1-$2 | tail -12; echo "rc=$?"; } >> $OUT/2-hf-graph.txt 2>&1
done
left qwen3-tests && (run timeout 150 python3 -m pytest -n 14 -q -p no:cacheprovider tests/test_rotary.py tests/test_linear_qkv.py; echo "rc=$?"; run timeout 200 python3 -m pytest -n 14 -q -p no:cacheprovider tests/test_llama.py tests/test_generate.py tests/test_tensor_parallel.py -k "qwen3 or real_shape or prefill"; echo "rc=$?") > $OUT/3-qwen3-tests.txt 2>&1
left session111-patches && rm -rf /tmp/B && mkdir -p /tmp/B && cp -r src tests research /tmp/B/ && (cd /tmp/B && patch -s -p1 < $ROOT/$S111/scope-scratch.diff && patch -s -p1 < $ROOT/$S111/capture-spare-workspace.diff) || echo "patch failed" > $OUT/4-patch.txt
[ -d /tmp/B/src ] && left session111-tests && (cd /tmp/B && PYTHONPATH=/tmp/B/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 120 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider tests/test_decode_plan.py tests/test_decode_attention.py tests/test_capture.py tests/test_side_effects.py -k "split or spare or scope or chain or another_stream or scratch"; echo "rc=$?") > $OUT/4-tests-B.txt 2>&1

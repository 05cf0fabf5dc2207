#!/bin/bash
# Session 115, second call: session 113's tests on a GPU (the new families, sliding windows
# past the cache, Phi-3-mini's real-shape greedy test, head_dim 96 and 256, YaRN and
# LongRoPE), then the demo at Phi-3-mini's shape, batch 1 and 8, against the hand graph.
set -u
# DEADLINE (epoch seconds, optional): parts that would start after it are skipped
left() { [ "$(date +%s)" -lt "${DEADLINE:-9999999999}" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-f TRITON_CACHE_DIR=/tmp/tr-f "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
left family-window-tests && (run timeout 240 python3 -m pytest -n 14 -q -p no:cacheprovider tests/test_llama.py tests/test_generate.py tests/test_tensor_parallel.py tests/test_decode_attention.py -k "phi3 or granite or ministral or smollm3 or per_family or families or real_shape or window or sliding or longrope or rope_scaling or pytorch_bin or gemma"; echo "rc=$?") > $OUT/5-family-window-tests.txt 2>&1
left phi3-demo && { echo "\$ tilegraph demo --model phi3-mini --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 run timeout 200 python3 -m tilegraph demo --model phi3-mini --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo | tail -25; echo "rc=$?"; } > $OUT/6-phi3-demo.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null; rm -rf $OUT/demo

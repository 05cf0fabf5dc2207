#!/bin/bash
# Written in session 113, not run (no device lent). A call of its own, after session 112's
# (results/2026-12-04-session112/next-device-call.sh: Qwen3's head norms on a GPU, session
# 111's two prepared fixes on a patched copy). About nine minutes.
# 4: session 113's tests on a GPU: the new families (Phi-3's stacked matrices, Granite's
#    folded scalars, Ministral, SmolLM3's layers that do not rotate) through the fused
#    kernels and the Generator's graphs; sliding windows past the cache (tg.decode_attention
#    (window=) alone, in a layer, under every launch shape, at Mistral's layout over 8192
#    positions, in the models and the Generator); the real-shape greedy test at Phi-3-mini's
#    shape (head_dim 96, fp32); tg.decode_attention at head_dim 96 and 256; YaRN and
#    LongRoPE (a prefill past the pretrained context choosing its tables on the device).
# 5: the demo at Phi-3-mini's shape (3.8B, bf16), batch 1 and 8, against the hand-captured
#    HF graph; 6: the same at batch 1 past its window of 2047 (prompt 3000, max_seq 4096).
set -u
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-f TRITON_CACHE_DIR=/tmp/tr-f timeout 220 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_llama.py tests/test_generate.py tests/test_tensor_parallel.py tests/test_decode_attention.py -k "phi3 or granite or ministral or smollm3 or per_family or families or real_shape or window or sliding or longrope or rope_scaling or pytorch_bin"; echo "rc=$?") > $OUT/4-family-window-tests.txt 2>&1
{ echo "\$ tilegraph demo --model phi3-mini --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-f TRITON_CACHE_DIR=/tmp/tr-f timeout 170 python3 -m tilegraph demo --model phi3-mini --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo; echo "rc=$?"; } > $OUT/5-phi3-demo.txt 2>&1
{ echo "\$ tilegraph demo --model phi3-mini --batch 1 --prompt-tokens 3000 --max-seq 4096 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-f TRITON_CACHE_DIR=/tmp/tr-f timeout 150 python3 -m tilegraph demo --model phi3-mini --batch 1 --prompt-tokens 3000 --max-seq 4096 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo-window; echo "rc=$?"; } > $OUT/6-phi3-demo-past-window.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null
for f in $OUT/demo-window/*.json; do cp "$f" "$OUT/window-$(basename "$f")"; done 2>/dev/null
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo demo-window

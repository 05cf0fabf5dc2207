#!/bin/bash
# Written in session 112, not run (no device lent). (a) Qwen3 on a GPU: the head-norm kernel
# (tg.rotary_qkv / tg.linear_qkv with q_norm_weight and k_norm_weight) and the model against
# transformers, CPU-sized tests on the GPU and the gpu-marked ones (Qwen3-0.6B's shape in fp32
# through the Generator); then the demo at Qwen3-0.6B's shape against the hand-captured HF
# graph, batch 1 and 8; every test of tg.linear_qkv (past 16 rows it now rotates the
# projection's interleaved columns in place, no deinterleaving copy). (b) Session 111's
# prepared fixes (results/2026-12-04-session111/next-device-call.sh explains them): their GPU
# tests on a patched copy.
set -u
S=results/2026-12-04-session112
S111=results/2026-12-04-session111
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-a TRITON_CACHE_DIR=/tmp/tr-a timeout 200 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_rotary.py tests/test_linear_qkv.py; echo "rc=$?"; PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-a TRITON_CACHE_DIR=/tmp/tr-a timeout 200 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_llama.py tests/test_generate.py tests/test_tensor_parallel.py -k "qwen3 or real_shape or prefill"; echo "rc=$?") > $OUT/1-qwen3-tests.txt 2>&1
{ echo "\$ tilegraph demo --model qwen3-0.6b --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-a TRITON_CACHE_DIR=/tmp/tr-a timeout 240 python3 -m tilegraph demo --model qwen3-0.6b --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo; echo "rc=$?"; } > $OUT/2-qwen3-demo.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null
rm -rf /tmp/B && mkdir -p /tmp/B && cp -r src tests research /tmp/B/ && (cd /tmp/B && patch -s -p1 < $ROOT/$S111/scope-scratch.diff && patch -s -p1 < $ROOT/$S111/capture-spare-workspace.diff) || echo "patch failed" > $OUT/3-patch.txt
(cd /tmp/B && PYTHONPATH=/tmp/B/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 120 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests/test_decode_plan.py tests/test_decode_attention.py tests/test_capture.py tests/test_side_effects.py -k "split or spare or scope or chain or another_stream or scratch"; echo "rc=$?") > $OUT/3-tests-B.txt 2>&1
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo

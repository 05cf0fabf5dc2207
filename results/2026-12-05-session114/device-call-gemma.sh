#!/bin/bash
# Session 114: the gated GELU activations of tg.linear ("geglu", "geglu_tanh") in every
# path, tg.rms_norm(residual=), and Gemma 3 (text) through the fused decode and the
# Generator on a GPU: CPU-sized tests and the gpu-marked ones (Gemma 3 1B's shape, bf16
# teacher-forced and fp32 greedy against transformers); then the demo at Gemma 3 1B's
# shape, batch 1 and 8, against the hand-captured HF graph. About eight minutes.
set -u
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g timeout 280 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_linear.py tests/test_matmul.py tests/test_autograd.py tests/test_rms_norm.py -k "glu or gemv_split or every_way or test_linear or bias_gradient or rms"; echo "rc=$?"; PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g timeout 240 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_llama.py tests/test_generate.py tests/test_tensor_parallel.py -k "gemma or bf16 or per_family"; echo "rc=$?") > $OUT/1-glu-gemma-tests.txt 2>&1
{ echo "\$ tilegraph demo --model gemma3-1b --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g timeout 200 python3 -m tilegraph demo --model gemma3-1b --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo; echo "rc=$?"; } > $OUT/2-gemma3-demo.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo

#!/bin/bash
# Session 114: the gated GELU activations of tg.linear ("geglu", "geglu_tanh") in every
# path, tg.rms_norm(residual=), tg.decode_attention(softcap=), and Gemma 2 and 3 through the
# fused decode and the Generator on a GPU: CPU-sized tests and the gpu-marked ones (every
# tiny family's per-family greedy test too; Gemma 3 1B's and Gemma 2 2B's shapes, bf16
# teacher-forced and fp32 greedy against transformers); then the demo at Gemma 3 1B's
# shape, batch 1 and 8, and Gemma 2 2B's, batch 1, against the hand-captured HF graph.
set -u
ROOT=$PWD
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(run timeout 200 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_linear.py tests/test_matmul.py tests/test_autograd.py tests/test_rms_norm.py tests/test_decode_attention.py -k "glu or gemv_split or every_way or test_linear or bias_gradient or rms or softcap or gemma2"; echo "rc=$?") > $OUT/1-kernel-tests.txt 2>&1
(run timeout 230 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_llama.py tests/test_generate.py tests/test_tensor_parallel.py -k "gemma or bf16 or per_family"; echo "rc=$?") > $OUT/2-model-tests.txt 2>&1
for spec in "gemma3-1b 1,8" "gemma2-2b 1"; do set -- $spec
  { echo "\$ tilegraph demo --model $1 --batch $2 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
    COLUMNS=200 run timeout 150 python3 -m tilegraph demo --model $1 --batch $2 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo-$1; echo "rc=$?"; } > $OUT/3-demo-$1.txt 2>&1
  for f in $OUT/demo-$1/*.json; do cp "$f" "$OUT/$1-$(basename "$f")"; done 2>/dev/null
done
cd $OUT && tar czf all.tgz *.txt *.json; rm -rf *.txt *.json demo-*

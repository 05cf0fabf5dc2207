#!/bin/bash
# For session 127, kind nvidia-h100-x1 (session 126 found no machine for it): the
# per-head q/k norm kernels' tests and the model tests of Falcon and of StableLM's and
# Cohere's per-head LayerNorms on the GPU; StableLM 2 1.6B's shape with qk_layernorm on at
# batch 1; Falcon 7B's shape (71 q heads on one kv head; random weights, bf16) at batch 1
# and 4 against transformers eager, its hand-captured graph (which transformers 5.17's
# Falcon refuses: listed as unavailable) and torch.compile. Timeouts sum to about 470 s.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 120 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 4 tests/test_rotary.py \
  tests/test_linear_qkv.py tests/test_llama.py tests/test_generate.py \
  -k "norm or falcon or stablelm or cohere" > $OUT/1-tests.txt 2>&1
echo "tests rc=$?" >> $OUT/0-gpu.txt
mkdir -p /tmp/stablelm-qk && echo '{"model_type": "stablelm", "vocab_size": 100352,
 "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
 "num_attention_heads": 32, "num_key_value_heads": 32, "partial_rotary_factor": 0.25,
 "rope_theta": 10000, "use_qkv_bias": true, "qk_layernorm": true, "layer_norm_eps": 1e-5,
 "tie_word_embeddings": false, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}' \
  > /tmp/stablelm-qk/config.json
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
}
demo stablelm-qk 100 --model /tmp/stablelm-qk --batch 1 --variants hf-graph,tilegraph
demo falcon7b 250 --model falcon-7b --batch 1,4 \
  --variants hf-eager,hf-graph,hf-compile,tilegraph
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

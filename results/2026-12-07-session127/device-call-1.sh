#!/bin/bash
# Session 127, call 1: the GPU tests of the learned position tables (decode_inputs,
# greedy_step, GPT-2 / OPT / GPT-BigCode models) and session 126's unrun ones (per-head q/k
# LayerNorms, Falcon); then issue 20's demo at batch 1 on shapes of the new families
# (random weights, bf16) against transformers' hand-captured graph, and session 126's
# StableLM 2 (qk_layernorm) and Falcon 7B shapes. Timeouts sum to about 560 s.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 4 \
  tests/test_decode_inputs.py tests/test_greedy.py tests/test_rotary.py \
  tests/test_linear_qkv.py tests/test_llama.py tests/test_generate.py \
  -k "inputs or greedy or norm or falcon or stablelm or cohere or gpt2 or opt or bigcode or learned" \
  > $OUT/1-tests.txt 2>&1
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
demo gpt2 70 --model gpt2 --batch 1 --variants hf-graph,tilegraph
demo opt1.3b 100 --model opt-1.3b --batch 1 --variants hf-graph,tilegraph
demo starcoder1b 100 --model starcoderbase-1b --batch 1 --variants hf-graph,tilegraph
demo stablelm-qk 70 --model /tmp/stablelm-qk --batch 1 --variants hf-graph,tilegraph
demo falcon7b 70 --model falcon-7b --batch 1 --variants hf-eager,tilegraph
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

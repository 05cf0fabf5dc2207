#!/bin/bash
# Session 125's device call: the LayerNorm and parallel-layer families' tests through the
# kernels on the GPU (GPT-NeoX's first time there), then random weights of Phi-2's shape,
# Pythia 1B's (GPT-NeoX: two LayerNorms in parallel) and StarCoder2 3B's at batch 1 against
# transformers' hand-captured graph, and Qwen2-0.5B at batch 1 and 8 where the machine is an
# H200 (issue 20's figure there). Timeouts sum to 575 s.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 6 tests/test_llama.py \
  tests/test_generate.py -k "starcoder2 or stablelm or nemotron or tiny-olmo] or layer_norm or tiny-phi] or tiny-phi- or cohere or gpt_neox" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$?" >> $OUT/0-gpu.txt
config() {  # directory json
  mkdir -p /tmp/$1 && echo "$2" > /tmp/$1/config.json
}
config phi-2 '{"model_type": "phi", "architectures": ["PhiForCausalLM"], "vocab_size": 51200,
 "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32,
 "num_attention_heads": 32, "num_key_value_heads": 32, "partial_rotary_factor": 0.4,
 "rope_theta": 10000, "hidden_act": "gelu_new", "layer_norm_eps": 1e-5,
 "max_position_embeddings": 2048, "tie_word_embeddings": false, "torch_dtype": "bfloat16"}'
config pythia-1b '{"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"],
 "vocab_size": 50304, "hidden_size": 2048, "intermediate_size": 8192,
 "num_hidden_layers": 16, "num_attention_heads": 8, "rotary_pct": 0.25,
 "rotary_emb_base": 10000, "use_parallel_residual": true, "hidden_act": "gelu",
 "layer_norm_eps": 1e-5, "max_position_embeddings": 2048, "tie_word_embeddings": false,
 "torch_dtype": "float16"}'
config starcoder2-3b '{"model_type": "starcoder2", "architectures": ["Starcoder2ForCausalLM"],
 "vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288,
 "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
 "sliding_window": 4096, "rope_theta": 999999.4420358813, "norm_epsilon": 1e-5,
 "use_bias": true, "max_position_embeddings": 16384, "tie_word_embeddings": true,
 "torch_dtype": "bfloat16"}'
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
}
demo phi2-b1 100 --model /tmp/phi-2 --batch 1 --variants hf-graph,tilegraph
demo pythia1b-b1 100 --model /tmp/pythia-1b --batch 1 --variants hf-graph,tilegraph
demo starcoder2-b1 105 --model /tmp/starcoder2-3b --batch 1 --variants hf-graph,tilegraph
if grep -q H200 $OUT/0-gpu.txt; then
  demo qwen2-h200 120 --model qwen2-0.5b --batch 1,8 --variants hf-graph,tilegraph
fi
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

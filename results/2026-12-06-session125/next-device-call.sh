#!/bin/bash
# For session 126's device call: GPT-J's tests through the kernels on the GPU (added after
# session 125's call), random weights of GPT-J 6B's shape at batch 1 against transformers'
# hand-captured graph, and Qwen2-0.5B at batch 1 and 8 where the machine is an H200 (issue
# 20's figure there, still unmeasured). Timeouts sum to about 400 s.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 120 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 6 tests/test_llama.py \
  tests/test_generate.py -k "gptj" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$?" >> $OUT/0-gpu.txt
config() {  # directory json
  mkdir -p /tmp/$1 && echo "$2" > /tmp/$1/config.json
}
config gptj-6b '{"model_type": "gptj", "architectures": ["GPTJForCausalLM"],
 "vocab_size": 50400, "n_embd": 4096, "n_layer": 28, "n_head": 16, "rotary_dim": 64,
 "n_inner": null, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
 "n_positions": 2048, "tie_word_embeddings": false, "torch_dtype": "float16"}'
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
}
demo gptj6b-b1 140 --model /tmp/gptj-6b --batch 1 --variants hf-graph,tilegraph
if grep -q H200 $OUT/0-gpu.txt; then
  demo qwen2-h200 120 --model qwen2-0.5b --batch 1,8 --variants hf-graph,tilegraph
fi
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

#!/bin/bash
# Session 126's device call: GPT-J's and Falcon's tests through the kernels on the GPU,
# random weights of Falcon 7B's shape (71 q heads on one kv head, 4544 wide) and GPT-J 6B's
# at batch 1 against transformers' hand-captured graph, and Qwen2-0.5B at batch 1 and 8
# where the machine is an H200 (issue 20's figure there). Timeouts sum to about 560 s.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 3 tests/test_llama.py \
  tests/test_generate.py -k "gptj or falcon" > $OUT/1-tests.txt 2>&1
echo "tests rc=$?" >> $OUT/0-gpu.txt
mkdir -p /tmp/gptj-6b && echo '{"model_type": "gptj", "architectures": ["GPTJForCausalLM"],
 "vocab_size": 50400, "n_embd": 4096, "n_layer": 28, "n_head": 16, "rotary_dim": 64,
 "n_inner": null, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
 "n_positions": 2048, "tie_word_embeddings": false, "torch_dtype": "float16"}' \
  > /tmp/gptj-6b/config.json
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
}
demo falcon7b-b1 170 --model falcon-7b --batch 1 --variants hf-graph,tilegraph
demo gptj6b-b1 140 --model /tmp/gptj-6b --batch 1 --variants hf-graph,tilegraph
if grep -q H200 $OUT/0-gpu.txt; then
  demo qwen2-h200 100 --model qwen2-0.5b --batch 1,8 --variants hf-graph,tilegraph
fi
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

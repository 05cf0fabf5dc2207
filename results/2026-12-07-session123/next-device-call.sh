#!/bin/bash
# For session 124's device calls (timeout 560 each). Session 123 had 189 s of device time
# left from an interrupted session and no machine to start, so everything since session
# 122's GPU calls is CPU-only: session 122's multimodal loading, stored LM heads and EXAONE
# 4, and session 123's OLMo 2 and 3 (q and k each normalised as a whole: tg.rotary_qkv's
# kernel loads all of q's or k's heads a row as one tile), Hunyuan's dense models (head
# norms after the rotation), Ministral 3 (q scaled past the pretrained context), Arcee
# (an ungated relu^2 MLP: tg.linear's "relu2"), NanoChat, VaultGemma, HyperCLOVA X and
# EXAONE 4.5's decoder. PART=a: those tests on the GPU
# under its transformers (the tiny models through the kernels; test_llama's,
# test_generate's, test_rotary's and test_linear_qkv's family and kernel tests run on the
# GPU without -m gpu), then every gpu-marked test outside the model files in 8 workers
# (session 119: about 5 min on an H200). PART=b: the model files' tests in 3 workers (about
# 4.5 min). PART=c, on an H200 (kind nvidia-h200): Qwen2-0.5B and ERNIE 4.5 0.3B at batch 1
# (issue 20's 60%: Qwen2-0.5B 49.3% there in session 108, 61.9% of an H100's floor in
# session 121) and random weights of an OLMo-2-1B-like shape (the model card's 16 layers,
# 2048 wide, 16 heads; an MLP of 8192 and a vocabulary of 100352 assumed) at batch 1 and 8.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
PART=${PART:-a}
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
tests() {  # name seconds pytest-args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m pytest -q -rfE --tb=short -p no:cacheprovider "$@" \
    > $OUT/$name.txt 2>&1
  echo "$name rc=$?" >> $OUT/0-gpu.txt
}
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" \
    > $OUT/$name.txt 2>&1
  echo "$name rc=$?" >> $OUT/0-gpu.txt
}
if [ "$PART" = a ]; then
  tests 1-loading 200 -n 6 tests/test_llama.py tests/test_generate.py tests/test_cli.py \
    tests/test_rotary.py tests/test_linear_qkv.py -k "multimodal or unties or tied or \
checkpoint_directory or no_checkpoint or exaone4 or olmo or hunyuan or ministral3 or \
arcee or nanochat or vaultgemma or hyperclovax or relu2 or all_heads or other_widths or after_rotary"
  tests 2-gpu-suite 350 -m gpu -n 8 tests --ignore=tests/test_llama.py \
    --ignore=tests/test_generate.py
elif [ "$PART" = b ]; then
  tests 3-model-tests 540 -m gpu -n 3 tests/test_llama.py tests/test_generate.py
else
  demo qwen2-b1 170 --model qwen2-0.5b --batch 1 --variants tilegraph
  demo ernie-b1 150 --model ernie4.5-0.3b --batch 1 --variants tilegraph
  mkdir -p /tmp/olmo2-1b && cat > /tmp/olmo2-1b/config.json <<'JSON'
{"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], "vocab_size": 100352,
 "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
 "num_attention_heads": 16, "num_key_value_heads": 16, "rms_norm_eps": 1e-6,
 "rope_theta": 500000, "max_position_embeddings": 4096, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16"}
JSON
  demo olmo2-b1-b8 220 --model /tmp/olmo2-1b --batch 1,8 --variants hf-graph,tilegraph
fi
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

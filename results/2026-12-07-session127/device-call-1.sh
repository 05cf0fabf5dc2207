#!/bin/bash
# Session 127, call 1: the GPU tests of the learned position tables (decode_inputs,
# greedy_step, GPT-2 / OPT / GPT-BigCode models) and session 126's unrun ones (per-head q/k
# LayerNorms, Falcon); then issue 20's demo at batch 1 on shapes of the new families
# (random weights, bf16) against transformers' hand-captured graph, and session 126's
# Falcon 7B shape against transformers eager. Timeouts sum to about 490 s.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
tests() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 4 "$@" \
    > $OUT/$name.txt 2>&1
  echo "$name rc=$?" >> $OUT/0-gpu.txt
}
tests 1-kernel-tests 60 tests/test_decode_inputs.py tests/test_greedy.py \
  tests/test_rotary.py tests/test_linear_qkv.py -k "inputs or greedy or head or norm"
tests 2-model-tests 120 tests/test_llama.py tests/test_generate.py \
  -k "falcon or stablelm or cohere or gpt2 or opt or bigcode or learned"
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
}
demo gpt2 60 --model gpt2 --batch 1 --variants hf-graph,tilegraph
demo opt1.3b 90 --model opt-1.3b --batch 1 --variants hf-graph,tilegraph
demo starcoder1b 90 --model starcoderbase-1b --batch 1 --variants hf-graph,tilegraph
demo falcon7b 70 --model falcon-7b --batch 1 --variants hf-eager,tilegraph
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

#!/bin/bash
# For session 132: what session 131 could not run (a failed start used its last device
# time). Head norm biases in the rotary kernel (tg.rotary_qkv, tg.linear_qkv's second
# kernel: whole files, their signatures changed); Persimmon and Fuyu through the kernels
# against transformers 5.17, with the families whose head norms take the rotary kernel
# (Qwen3's prefill, StableLM, Cohere, OLMo 2, Hunyuan, Apertus); Persimmon 8B's shape timed;
# Apertus 8B against Llama 3 8B in one call (the cost of xIELU's kernel of its own: six
# kernels a layer against five); Qwen2-0.5B at batch 1 (issue 20: 61.8% on an H100 in
# session 131; 49.3% on an H200 in session 108). GUARD (default 575 s) skips what would
# pass the call's limit; four files come back.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-575} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
timeout 120 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_rotary.py tests/test_linear_qkv.py > $OUT/1-tests.txt 2>&1
echo "kernel tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
timeout 120 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_llama.py tests/test_generate.py \
  -k "persimmon or fuyu or qwen3 or stablelm or cohere or olmo2 or hunyuan or apertus" \
  >> $OUT/1-tests.txt 2>&1
echo "model tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  if [ $(left) -lt $limit ]; then limit=$(left); fi
  if [ $limit -lt 40 ]; then echo "$name skipped ($(left) s left)" >> $OUT/0-log.txt; return; fi
  echo "=== $name: $*" >> $OUT/demos.txt
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" \
    >> $OUT/demos.txt 2>&1
  echo "$name rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
  tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null   # (kept if a later step is cut off)
}
demo persimmon 120 --model persimmon-8b --batch 1 --variants tilegraph
demo apertus 100 --model apertus-8b --batch 1 --variants tilegraph
demo llama3 100 --model llama3-8b --batch 1 --variants tilegraph
demo qwen2 70 --model qwen2-0.5b --batch 1 --variants tilegraph
true

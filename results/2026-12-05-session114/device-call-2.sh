#!/bin/bash
# Session 114, call 2 (about four and a half minutes): the fixes after call 1 (transformers' Gemma 2
# built eager: 5.17 took SDPA and left the softcap out; decode attention's rule fitting fp32
# heads of 256 in shared memory; transformers' peers over full cache layers where every
# window holds max_seq) with the Gemma tests again, the real shapes among them; Gemma 3 1B's
# demo at batch 1 alone. (Gemma 2 2B's demo again and session 112's Qwen3 tests left out:
# the device time left would not hold them.)
set -u
ROOT=$PWD
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(run timeout 140 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_llama.py tests/test_generate.py tests/test_decode_attention.py tests/test_model_demo.py -k "gemma or fit or softcap or hf_peers"; echo "rc=$?") > $OUT/1-gemma-tests.txt 2>&1
{ echo "\$ tilegraph demo --model gemma3-1b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 run timeout 135 python3 -m tilegraph demo --model gemma3-1b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo; echo "rc=$?"; } > $OUT/2-demo-gemma3-1b.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null; rm -rf $OUT/demo   # at most 8 files come back

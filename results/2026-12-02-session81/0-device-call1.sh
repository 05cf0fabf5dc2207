#!/bin/bash
# session 81, call 1: the new rows read apart (NEW_ROWS) — PTX on triton 3.6, GPU tests, steps
set -u
export PYTHONPATH=$PWD/src
t() { name=$1; limit=$2; shift 2; ( timeout $limit "$@" ) > $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/0-gpu.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/0-gpu.txt
TRITON_CACHE_DIR=/tmp/trc0 t 1-ptx 150 python3 research/tmp_ptx_order.py &
TILEGRAPH_CACHE_DIR=/tmp/tgc1 TRITON_CACHE_DIR=/tmp/trc1 t 2-tests-attention 230 python3 -m pytest -m gpu -q -n 8 tests/test_decode_attention.py
wait
export TILEGRAPH_CACHE_DIR=/tmp/tgc2 TRITON_CACHE_DIR=/tmp/trc2
t 3-steps-tinyllama-b1 95 python3 research/probe_attention_step.py --model tinyllama --context 160,320,1024 --sweep --new-rows
t 4-steps-qwen2-b1 95 python3 research/probe_attention_step.py --model qwen2-0.5b --context 160,320,1024 --sweep --new-rows
t 5-steps-tinyllama-b8 95 python3 research/probe_attention_step.py --model tinyllama --batch 8 --context 160,320,1024 --sweep --new-rows
t 6-steps-llama1b-b1 80 python3 research/probe_attention_step.py --model llama3.2-1b --context 160,320,1024 --sweep --new-rows

#!/bin/bash
# Session 110, call 1: (1) where the 8-row whole-slice tile's 4.2 us go (session 109's
# research/probe_rows_timeline.py); (2) decode attention's fixed cost a call against its
# streaming rate over context sweeps of few-pair shapes (research/attention_fixed_cost.py).
set -u
export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/0-gpu.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/0-gpu.txt
for rows in 8 2 16; do
  for shape in 2048x2048 4096x4096 1024x1024; do
    { echo "\$ probe_rows_timeline.py --rows $rows --shape $shape"
      timeout 40 python3 research/probe_rows_timeline.py --rows $rows --shape $shape; echo "rc=$?"; } \
      >> $OUT/1-timeline.txt 2>&1
  done
done
{ echo "\$ attention_fixed_cost.py (batch 1)"
  timeout 240 python3 research/attention_fixed_cost.py; echo "rc=$?"
  echo "\$ attention_fixed_cost.py --batch 4 --shapes 28/4x128,32/8x64 --contexts 1024,2048,4096,8192,16384"
  timeout 150 python3 research/attention_fixed_cost.py --batch 4 --shapes 28/4x128,32/8x64 \
    --contexts 1024,2048,4096,8192,16384; echo "rc=$?"; } > $OUT/2-attention-fixed-cost.txt 2>&1
cd $OUT && tar czf all.tgz *.txt && rm *.txt

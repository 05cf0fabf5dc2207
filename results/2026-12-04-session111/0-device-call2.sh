#!/bin/bash
# Session 111, call 2: (a) the fp32 8-row chain where tg.linear ran slow in call 1 (1280^2,
# 1536^2) with F.linear beside it, and 2048^2; (b) the same shapes alone in decode-grid;
# (c) OpenLLaMA-3B's shape (3200 wide, 32 heads of head_dim 100, no GQA, 26 layers), random
# weights from its config, against transformers eager and a hand-captured graph.
set -u
S=results/2026-12-04-session111
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
{ echo "\$ research/probe_rows_warp.py --shapes 1280x1280,1536x1536,2048x2048 --rows 8 --tiles 4:4 --peers"
  PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-p TRITON_CACHE_DIR=/tmp/tr-p timeout 100 python3 research/probe_rows_warp.py --shapes 1280x1280,1536x1536,2048x2048 --rows 8 --tiles 4:4 --peers; echo "rc=$?"; } > $OUT/1-rows-warp.txt 2>&1
{ echo "\$ tilegraph bench decode-grid --dtype fp32 --rows 8 --shapes 1280x1280,1536x1536"
  COLUMNS=200 PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g timeout 100 python3 -m tilegraph bench decode-grid --dtype fp32 --rows 8 --shapes 1280x1280,1536x1536 --out $OUT/grid; echo "rc=$?"; } > $OUT/2-grid.txt 2>&1
{ echo "\$ tilegraph demo --model $S/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256"
  COLUMNS=200 PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-c TRITON_CACHE_DIR=/tmp/tr-c timeout 280 python3 -m tilegraph demo --model $S/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256 --out $OUT/demo; echo "rc=$?"; } > $OUT/3-openllama.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo grid

#!/bin/bash
# Written in session 111, not run (no device lent after call 1). (a) Does plain_plan's lone
# timing rank fp32 8-row plans as a chain of them runs them? (research/probe_plain_chain.py:
# call 1 timed plain tg.linear chains at 1280^2 12.4 us a link and 1536^2 17.8, where stack
# projections of those widths cost about 6.6 and 7.4 us); (b) the same chains with F.linear
# beside them; (c) OpenLLaMA-3B's shape (3200 wide, 32 heads of head_dim 100, no GQA, 26
# layers), random weights from its config, against transformers eager and a hand graph.
set -u
S=results/2026-12-04-session111
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
{ echo "\$ research/probe_plain_chain.py --shapes 1280x1280,1536x1536,1024x1024,2048x2048 --rows 8"
  PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-p TRITON_CACHE_DIR=/tmp/tr-p timeout 150 python3 research/probe_plain_chain.py --shapes 1280x1280,1536x1536,1024x1024,2048x2048 --rows 8; echo "rc=$?"; } > $OUT/1-plain-chain.txt 2>&1
{ echo "\$ research/probe_rows_warp.py --shapes 1280x1280,1536x1536 --rows 8 --tiles 4:4 --peers"
  PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-w TRITON_CACHE_DIR=/tmp/tr-w timeout 80 python3 research/probe_rows_warp.py --shapes 1280x1280,1536x1536 --rows 8 --tiles 4:4 --peers; echo "rc=$?"; } > $OUT/2-rows-warp.txt 2>&1
{ echo "\$ tilegraph demo --model $S/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256"
  COLUMNS=200 PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-c TRITON_CACHE_DIR=/tmp/tr-c timeout 280 python3 -m tilegraph demo --model $S/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256 --out $OUT/demo; echo "rc=$?"; } > $OUT/3-openllama.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo

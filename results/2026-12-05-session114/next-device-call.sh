#!/bin/bash
# Written in session 114 for the next device call (about eight minutes): the demos its
# device time did not reach. Gemma 3 1B's shape at batch 1 (about 140 s cold; twice cut
# off at 135 s) and batch 8, Gemma 2 2B's at batch 1 again (its hand-captured HF graph,
# now over full cache layers), each against transformers eager and the hand graph; then
# the tiny Gemma 1 through the fused path on the GPU. Session 112's and 113's scripts
# (results/2026-12-04-session112/, results/2026-12-05-session113/) are still to run.
set -u
ROOT=$PWD
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
for spec in "gemma3-1b 1 200" "gemma2-2b 1 130" "gemma3-1b 8 200"; do set -- $spec
  { echo "\$ tilegraph demo --model $1 --batch $2 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
    COLUMNS=200 run timeout $3 python3 -m tilegraph demo --model $1 --batch $2 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out $OUT/demo; echo "rc=$?"; } > $OUT/1-demo-$1-b$2.txt 2>&1
  for f in $OUT/demo/*.json; do cp "$f" "$OUT/$1-b$2.json"; done 2>/dev/null; rm -rf $OUT/demo
done
(run timeout 60 python3 -m pytest -n 8 -q -p no:cacheprovider tests/test_llama.py -k "tiny-gemma]"; echo "rc=$?") > $OUT/2-gemma1-tests.txt 2>&1

# Session 105, call 4 (limit 200 s): TinyLlama fp32 at batch 8 on the tree (its k/v projections,
# 256 x 2048 at 8 rows, run the row loop, gathered since 7c89d75; session 103: 1.830 ms a token).
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo TRITON_CACHE_DIR=/tmp/tr-demo
{ echo "\$ tilegraph demo --model tinyllama --dtype fp32 --batch 8 ..."; timeout 200 python3 -m tilegraph demo --model tinyllama --dtype fp32 --batch 8 --variants tilegraph --no-sweeps --new-tokens 32 --prompt-tokens 32 --max-seq 128 --out /tmp/d4; echo "rc=$?"; } > $OUT/1-demo-fp32-b8.txt 2>&1

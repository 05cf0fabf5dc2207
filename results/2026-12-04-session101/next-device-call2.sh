# Written in session 101 for the next session, not run: 6 minutes at most (stage limits
# 170/170). fp32 TinyLlama decode steps at batch 8, the tree against the tree without
# session 100's fp32 weight-left rule (/tmp/B): session 101's call 3 ran past 110 s in the
# cold build at max_seq 512 (three context bands a bucket); max_seq 256 keeps one band.
set -u
# the rule without the tile: its bound out of reach
mkdir -p /tmp/B && cp -r src /tmp/B/ && sed -i 's/^FP32_WEIGHT_LEFT_MIN_FILL = .*/FP32_WEIGHT_LEFT_MIN_FILL = float("inf")/' /tmp/B/src/tilegraph/kernels/decode_plan.py
grep -n "^FP32_WEIGHT_LEFT_MIN_FILL" /tmp/B/src/tilegraph/kernels/decode_plan.py > $OUT/0-revert.txt
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
D="--dtype fp32 --batch 8 --variants hf-graph,tilegraph --no-sweeps --new-tokens 64 --prompt-tokens 64 --max-seq 256"
t 1-tinyllama-tree 170 $PWD/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d1
t 2-tinyllama-before 170 /tmp/B/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d2

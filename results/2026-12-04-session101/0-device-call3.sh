# Session 101 call 3: fp32 Llama-family decode steps with the fp32 weight-left tile (tree)
# and without it (/tmp/B): TinyLlama (q/o 2048 x 2048 and down 2048 x 5632 take it: 256
# programs) and Llama-3.2-1B (the same, and down 2048 x 8192) at batch 8 and 16, random
# weights, tilegraph's Generator beside transformers' hand-captured graph.
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session100/fp32-weight-left.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
D="--dtype fp32 --batch 8,16 --variants hf-graph,tilegraph --no-sweeps --new-tokens 64 --prompt-tokens 64 --max-seq 512"
t 1-tinyllama-tree 110 $PWD/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d1
t 2-tinyllama-before 110 /tmp/B/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d2
t 3-llama1b-tree 110 $PWD/src python3 -m tilegraph demo --model llama3.2-1b $D --out /tmp/d3
t 4-llama1b-before 110 /tmp/B/src python3 -m tilegraph demo --model llama3.2-1b $D --out /tmp/d4

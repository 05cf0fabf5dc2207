# Written in session 101 for the next session, not run: 9 minutes at most (stage limits
# 150/170/170). Session 101 ran out of device time before these.
# 1. The two fp32 stack points where session 100's weight-left rule lost (d = 1664 at 6 rows,
#    d = 2560 at 16): the rule's tile at other splits and depths, and the x-left tile, forced
#    (research/stack_plans.py; the rule's own tile runs too). If a split or depth the rule
#    could reach wins both, change fp32_weight_left_config's split; if only the x-left tile
#    does, leave it (notes/kernels.md, session 101).
# 2. fp32 TinyLlama decode steps at batch 8, tree against the tree without the rule
#    (/tmp/B): session 101's call 3 ran past 110 s in the cold build at max_seq 512 (three
#    context bands a bucket); max_seq 256 keeps one band.
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session100/fp32-weight-left.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
T=32/128/3/0,64/64/3/2/4/0/1,64/64/3/4/4/0/1,64/64/3/6/4/0/1,64/64/3/8/4/0/1,64/64/4/8/4/0/1,64/32/4/8/4/0/1
t 1-stack-plans 150 $PWD/src python3 research/stack_plans.py fp32 1664x6,2560x16 $T
D="--dtype fp32 --batch 8 --variants hf-graph,tilegraph --no-sweeps --new-tokens 64 --prompt-tokens 64 --max-seq 256"
t 2-tinyllama-tree 170 $PWD/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d2
t 3-tinyllama-before 170 /tmp/B/src python3 -m tilegraph demo --model tinyllama $D --out /tmp/d3

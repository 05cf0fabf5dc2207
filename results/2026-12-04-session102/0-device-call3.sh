# Session 102 call 3: the doubled fp32 weight-left split off the shapes it was chosen on.
# Lone projections at 5, 8 and 12 rows whose split changes: 96 column blocks and near it
# (5760^2, 6000 x 3000: split 2 -> 4), 133-192 blocks with short K (8704 x 512, 12000 x
# 256, 9216 x 1024) and long (9216^2, 10240^2), among them 144 blocks (9216), where split
# 2 launches 2.18 programs an SM: 6144^2 at 2.18 (split 3) ran slower than at 1.45 in call 1.
# Stacks at d = 5760 and 9216; Qwen2-0.5B's fp32 decode at batch 8 (its gate/up, 9728 x
# 896, takes split 2). Tree against the tree before the change (/tmp/B).
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -R -p1 < $OLDPWD/results/2026-12-04-session102/fp32-two-waves.patch) > $OUT/0-revert.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
S=5760x5760,6000x3000,8704x512,12000x256,9216x1024,9216x9216,10240x10240
t 1-lone-tree 60 $PWD/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 5,8,12 --shapes $S
t 2-lone-before 60 /tmp/B/src python3 research/probe_offlist_grid.py --dtype fp32 --rows 5,8,12 --shapes $S
t 3-stack-tree 45 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 5760,9216 --rows 6,12 --out /tmp/s3 --format md,json
t 4-stack-before 45 /tmp/B/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths 5760,9216 --rows 6,12 --out /tmp/s4 --format md,json
D="--dtype fp32 --batch 8 --variants tilegraph --no-sweeps --new-tokens 64 --prompt-tokens 64 --max-seq 256"
t 5-qwen2-tree 140 $PWD/src python3 -m tilegraph demo --model qwen2-0.5b $D --out /tmp/d1
t 6-qwen2-before 140 /tmp/B/src python3 -m tilegraph demo --model qwen2-0.5b $D --out /tmp/d2

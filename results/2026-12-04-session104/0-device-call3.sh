# Session 104 call 3: split plans ask L2 for one tile past their first before PDL's wait by
# default (_dot_rows.L2_AHEAD_TILES = 1). The tree before: the same with it 0 (/tmp/B).
set -u
mkdir -p /tmp/B && cp -r src /tmp/B/ && sed -i 's/^L2_AHEAD_TILES = 1$/L2_AHEAD_TILES = 0/' /tmp/B/src/tilegraph/kernels/_dot_rows.py
grep -n "^L2_AHEAD_TILES" /tmp/B/src/tilegraph/kernels/_dot_rows.py > $OUT/0-before.txt
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-tests 75 $PWD/src python3 -m pytest -q tests/test_decode_plan.py tests/test_norm_handoff.py tests/test_layerstack.py tests/test_decode_stack.py -m gpu -k "l2_before or pdl_chains or split_k_chains or split_k_captured or weight_left or fp32 or float32 or rule_by_rows" -p no:cacheprovider
G="bench decode-grid --dtype bf16 --rows 4,16 --format md"
t 2-grid-tree 80 $PWD/src python3 -m tilegraph $G --out /tmp/g2
t 3-grid-before 80 /tmp/B/src python3 -m tilegraph $G --out /tmp/g3
S="bench stack-grid --widths 2048,3072,4096 --rows 8 --format md"
t 4-stacks-tree 85 $PWD/src python3 -m tilegraph $S --out /tmp/s4
t 5-stacks-before 85 /tmp/B/src python3 -m tilegraph $S --out /tmp/s5
cd $OUT && tar czf all.tgz *.txt && rm *.txt

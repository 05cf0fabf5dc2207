# Session 99, call 2 (about 8 minutes): widths, row counts and shapes no issue names, in the
# two dtypes no recent session checked off the list (fp32, fp16): whole LayerStacks through
# the GraphRunner against the hand graph, and lone projections against F.linear.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 5-stacks-fp32-offlist 160 python3 -m tilegraph bench stack-grid --dtype fp32 --widths 768,1280,2560,3584 --rows 1,3,6,12 --out /tmp/s5 --format md,json
t 6-stacks-fp16-offlist 130 python3 -m tilegraph bench stack-grid --dtype fp16 --widths 768,1280,2560,3584 --rows 1,3,6,12 --out /tmp/s6 --format md,json
t 7-offlist-grid-fp32-fp16 220 python3 research/probe_offlist_grid.py --dtype fp32,fp16 --rows 1,3,6,12 --shapes 3072x2048,896x4864,1536x8960,3000x1000,9728x896,6144x4096
tar czf $OUT/extra-call2.tgz -C /tmp s5 s6 2>/dev/null

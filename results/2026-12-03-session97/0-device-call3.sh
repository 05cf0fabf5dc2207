# Session 97, call 3 (about 9 minutes): decode_plan.wide_rows_config (13-16 rows take fewer
# split-K slices) against the rule without it (WIDE_ROWS off, "narrow").
# 7. Alone, on shapes the rule was not read from (1792^2, 3584^2, 3200^2, 3072 x 2048) and two
#    it was, at 13 and 16 rows.
# 8-9. Whole bf16 LayerStacks at 13 and 16 rows, narrow then wide, d = 1536-4096.
# 10-11. tg.Generator at batch 16, A B A B: TinyLlama (q|k|v 2560 x 2048 unsplit, output
#    2048^2 in 512-column slices) and Qwen2-1.5B (q|k|v 2048 x 1536 and output 1536^2 in
#    512-column slices).
# 12. Issue 17's grid at 16 rows with it (session 93's full grid has the rule without it).
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
SET="import sys; from tilegraph.kernels import decode_plan; decode_plan.WIDE_ROWS = sys.argv[1] == '1'"
stacks() { t $1 85 python3 -c "$SET; from tilegraph.cli import main; sys.exit(main(sys.argv[2:]))" $2 bench stack-grid --dtype bf16 --widths 1536,1792,2048,2560,3072,3584,4096 --rows 13,16 --out /tmp/$1 --format md,json; }
stacks 8-stacks-narrow 0
stacks 9-stacks-wide 1
t 10-generator-tinyllama-b16 110 python3 research/time_generator.py s97 tinyllama 128 2048 16 narrow-rows,bands,narrow-rows,bands
t 11-generator-qwen1.5b-b16 110 python3 research/time_generator.py s97 qwen2-1.5b 128 2048 16 narrow-rows,bands,narrow-rows,bands
t 7-probe-wide-rows 110 python3 research/probe_wide_rows.py --shapes 1792x1792,3584x3584,3200x3200,3072x2048,2048x2048,4096x4096 --rows 13,16
t 12-decode-grid-16rows 90 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 16 --out /tmp/grid12 --format md,json

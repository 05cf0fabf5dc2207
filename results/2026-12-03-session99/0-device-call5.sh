# Session 99, call 5 (about 2.5 minutes): the fp32 rule's new bound (FP32_ROW_LOOP_MAX_TILE_WEIGHTS:
# tiles counted with K padded) on whole fp32 stacks at 5-8 rows, and the rule's fp32 tests.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 11-stacks-fp32-bound 100 python3 -m tilegraph bench stack-grid --dtype fp32 --widths 1024,1152,1280,1408 --rows 5,6,8 --out /tmp/s11 --format md,json
t 12-gpu-tests-fp32-rule 60 python3 -m pytest -q tests/test_decode_plan.py -k "fp32_rows or rule_plan_at_awkward or rule_by_rows"

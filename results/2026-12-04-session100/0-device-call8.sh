# Session 100 call 8 (the last 4.5 device minutes): research/fp32_weight_left.diff (since
# moved to fp32-weight-left-as-timed.diff here; landed with a higher bound) applied to
# a copy (/tmp/B): its fp32 tests on the GPU, then whole fp32 stacks at 6 and 12 rows with
# the diff and without (a short form of next-device-call.sh, stages cut where time ran out).
set -u
mkdir -p /tmp/B && cp -r src tests /tmp/B/ && (cd /tmp/B && patch -p1 < $OLDPWD/research/fp32_weight_left.diff) > $OUT/0-apply.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 16-tests-diff 50 /tmp/B/src python3 -m pytest -q -x /tmp/B/tests/test_decode_plan.py -k "fp32 or tf32 or rule_by_rows" -p no:cacheprovider
W=1280,2048,3584,8192
t 17-stacks-diff 60 /tmp/B/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths $W --rows 6,12 --out /tmp/s17 --format md
t 18-stacks-tree 60 $PWD/src python3 -m tilegraph bench stack-grid --dtype fp32 --widths $W --rows 6,12 --out /tmp/s18 --format md

# Session 105, call 1 (about 9 minutes; limits 150/100/100/130/60).
# 0. GPU tests of the three kernels that share _l2_prefetch.prefetch_lines since ab5e125
#    (committed after session 104's last GPU run).
# 1/1b/2/4: session 104's next-device-call.sh stages (the fp32 demo, stage 3, goes to call 2).
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 0-tests-prefetch 150 python3 -m pytest -q -m gpu tests/test_decode_attention.py tests/test_linear.py tests/test_decode_plan.py -p no:cacheprovider
t 1-rowloop 100 python3 research/stack_plans.py fp32 1024x8,768x8,1280x6 rowloop
mkdir -p /tmp/G && cp -r src /tmp/G/ && (cd /tmp/G && patch -s -p1 < $OLDPWD/research/row_loop_gathered.diff)
t2() { name=$1; limit=$2; shift 2
  export PYTHONPATH=/tmp/G/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t2 1b-rowloop-gathered 100 python3 research/stack_plans.py fp32 1024x8,768x8,1280x6 rowloop
t 2-tests-demo-dir 130 python3 -m pytest -q tests/test_cli.py tests/test_model_demo.py -k "checkpoint or demo_model or score_keeps" -p no:cacheprovider
t 4-x-left-l2 60 python3 research/stack_plans.py fp32 1280x16,1408x9 32/128/3/0/4/0/0/0,32/128/3/0/4/0/0/1
cd $OUT && tar czf all.tgz *.txt && rm *.txt

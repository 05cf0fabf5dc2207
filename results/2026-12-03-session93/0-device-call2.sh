# Session 93, call 2: the even deal is no longer the kernel's default but what plain_plan
# times beside a split-K rule at 3-16 rows (and a tune candidate). Its GPU tests, what
# plain_plan keeps where call 1 saw each way win, the even deal with its longer slices first
# (EVEN_SPLIT = 2), and issue 17's bf16 grid on this tree.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 6-gpu-tests 100 python3 -m pytest -m gpu -q tests/test_linear.py tests/test_decode_plan.py -k "split_k or plain or even"
t 7-plain-pick 110 python3 research/probe_plain_pick.py --shape 5632x2048,1536x8960 --rows 4,16 --dtypes bf16 --repeats 2
t 7b-probe-even-first 120 python3 research/probe_even_split.py --rows 4,16 --rounds 2
t 8-decode-grid-bf16 200 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/grid8 --format md,json
tar czf $OUT/extra-call2.tgz -C /tmp grid8 2>/dev/null

# Written in session 91 for the next session (not run). One call, under 10 minutes with a
# fresh start: where Qwen2-0.5B's step tuner and its Generator part (session 91: the tuner
# timed small tiles 2.5-4.9% faster, the Generator's tokens were 0.1-0.55% slower), with
# TinyLlama beside it as a model where the two agreed; then the b1 demo of Qwen2-0.5B.
#   bash results/2026-12-03-session91/next-device-call.sh
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-probe-qwen 240 python3 research/probe_step_vs_generator.py qwen2-0.5b
t 2-probe-tinyllama 200 python3 research/probe_step_vs_generator.py tinyllama
t 3-demo-qwen-b1 100 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo3

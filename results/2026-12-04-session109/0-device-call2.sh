#!/bin/bash
# Session 109 call 2 (about 9 minutes):
# 1. Session 108's norm fold on two shapes no issue names (time_steps.OFF_LIST's
#    llama3.2-3b and qwen2.5-3b), tg.Generator at batch 1: the tree before session 108
#    (this copy with s108-src.patch reversed) against this tree, each its own caches.
# 2. TinyLlama at 1792 cached positions (issue 20's 65%), not re-measured since session 82.
set -u
S=$PWD/results/2026-12-04-session109
rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src /tmp/A/src && (cd /tmp/A && patch -s -p1 -R < $S/s108-src.patch)
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt
M=llama3.2-3b,qwen2.5-3b
t 1-before 170 /tmp/A/src python3 research/time_generator.py before $M
t 2-tree 170 $PWD/src python3 research/time_generator.py tree $M
t 3-demo-tinyllama-1792 150 $PWD/src python3 -m tilegraph demo --model tinyllama --batch 1 \
  --prompt-tokens 1792 --variants tilegraph --no-sweeps --out /tmp/d3
cd $OUT && tar czf all.tgz *.txt && rm *.txt

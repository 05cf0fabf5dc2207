#!/bin/bash
# session 85, call 1 (one H200): the LL-protocol chain probe (does tagging each activation
# beat griddepcontrol.wait between dependent one-row projections?) and the plain-kernel
# pick for 5632x2048 in fp16 vs bf16 (why fp16 is 7% slower there).
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/0-gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 1-chain-ll 200 python3 research/probe_chain_signal.py --links 64 --modes pdl,count,ll,ll-early
TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 t 2-plain-pick-5632x2048 200 python3 research/probe_plain_pick.py --shape 5632x2048 --dtypes fp16,bf16 --repeats 2

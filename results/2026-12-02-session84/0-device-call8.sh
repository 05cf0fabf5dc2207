#!/bin/bash
# session 84, call 8 (one H200): does the Gluon ring's staging cost because every program
# reads the same lines of L2? The same kernel (no barrier) staging from 1, 2, 8 or 128
# copies of the vectors (program p from copy p % N).
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
V=packed-s2-nosync-ws,packed-s2-nosync-ws-x2,packed-s2-nosync-ws-x8,packed-s2-nosync-ws-x128,packed-s2-nosync-nostage-ws
TILEGRAPH_CACHE_DIR=/tmp/c18 TRITON_CACHE_DIR=/tmp/t18 t 18-gluon-copies-2048-22layers 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c18 TRITON_CACHE_DIR=/tmp/t18 t 19-gluon-copies-2048-22layers-again 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants packed-s2-nosync-ws-x128,packed-s2-nosync-ws

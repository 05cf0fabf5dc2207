#!/bin/bash
# session 84, call 7 (one H200): is the Gluon ring's consumer (the layers' warps) what keeps
# the input vector's staging exposed? The same variants with 8 warps instead of 4.
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
V=packed-s2-nosync-ws,packed-s2-nosync-w8-ws,packed-s4-nosync-w8-ws,packed-s2-nosync-nostage-w8-ws,packed-s2-ws,packed-s2-w8-ws,packed-s4-w8-ws
TILEGRAPH_CACHE_DIR=/tmp/c16 TRITON_CACHE_DIR=/tmp/t16 t 16-gluon-w8-2048-22layers 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c16 TRITON_CACHE_DIR=/tmp/t16 t 17-gluon-w8-4096 170 python3 research/probe_gluon_stack.py --widths 4096 --variants packed-s2-nosync-ws,packed-s2-nosync-w8-ws,packed-s2-ws,packed-s2-w8-ws

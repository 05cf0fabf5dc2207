#!/bin/bash
# session 84, call 4 (one H200): the Gluon stack with a producer warp of its own issuing the
# TMA copies (warp_specialize; the layers' warps meet only by a named barrier a tile) against
# the same without it.
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
V=packed-s2-nosync,packed-s2-nosync-ws,packed-s2,packed-s2-ws,packed-ws,packed-s4-ws,packed-s2-w8-ws
TILEGRAPH_CACHE_DIR=/tmp/c9 TRITON_CACHE_DIR=/tmp/t9 t 9-gluon-ws-2048 170 python3 research/probe_gluon_stack.py --widths 2048 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c9 TRITON_CACHE_DIR=/tmp/t9 t 10-gluon-ws-2048-22layers 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c11 TRITON_CACHE_DIR=/tmp/t11 t 11-gluon-ws-4096 170 python3 research/probe_gluon_stack.py --widths 4096 --variants packed-s2-nosync,packed-s2-nosync-ws,packed-s2,packed-s2-ws,packed-ws,packed-s2-w8-ws

#!/bin/bash
# session 84, call 3 (one H200): the packed Gluon stack with tiles of 2 and 4 blocks (16 and
# 32 KB at d = 2048): fewer waits and block meetings a byte.
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
V=packed-nosync,packed-s2-nosync,packed-s4-nosync,packed,packed-s2,packed-s4,packed-s2-w8,packed-s4-w8
TILEGRAPH_CACHE_DIR=/tmp/c6 TRITON_CACHE_DIR=/tmp/t6 t 6-gluon-sub-2048 170 python3 research/probe_gluon_stack.py --widths 2048 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c7 TRITON_CACHE_DIR=/tmp/t7 t 7-gluon-sub-4096 170 python3 research/probe_gluon_stack.py --widths 4096 --variants packed-nosync,packed-s2-nosync,packed,packed-s2,packed-s2-w8
TILEGRAPH_CACHE_DIR=/tmp/c6 TRITON_CACHE_DIR=/tmp/t6 t 8-gluon-sub-2048-22layers 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants packed-s2-nosync,packed-s4-nosync,packed-s2,packed-s4,packed-s2-w8

#!/bin/bash
# session 84, call 6 (one H200): what limits the Gluon ring without barriers at d = 2048: the
# same kernel with its weights resident in L2 (2 layers, 32 MB), and without the input
# vector staged between projections (nostage).
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
V=packed-s2-nosync,packed-s2-nosync-nostage,packed-s2-nosync-ws,packed-s2-nosync-nostage-ws,packed-s2
TILEGRAPH_CACHE_DIR=/tmp/c14 TRITON_CACHE_DIR=/tmp/t14 t 14-gluon-l2-2048-2layers 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 2 --calls 40 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c14 TRITON_CACHE_DIR=/tmp/t14 t 15-gluon-nostage-2048-22layers 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants $V

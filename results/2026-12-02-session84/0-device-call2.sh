#!/bin/bash
# session 84, call 2 (one H200): the Gluon stack with its weights packed tile after tile (a
# TMA tile one contiguous run) against the row-band tiles of call 1; and at 22 layers.
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
V=nosync,packed-nosync,ring,packed,packed-half,packed-w8
TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 t 3-gluon-packed-2048 170 python3 research/probe_gluon_stack.py --widths 2048 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c4 TRITON_CACHE_DIR=/tmp/t4 t 4-gluon-packed-4096 170 python3 research/probe_gluon_stack.py --widths 4096 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 t 5-gluon-packed-2048-22layers 170 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants packed-nosync,packed,packed-half

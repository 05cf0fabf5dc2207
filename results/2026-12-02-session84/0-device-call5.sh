#!/bin/bash
# session 84, call 5 (one H200): the Gluon stack's ring depth (does a deep TMA queue delay the
# small loads on the critical path: the input vector after each barrier, the barrier polls?)
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
V=packed-s2-r2,packed-s2-r3,packed-s2-r4,packed-s2-r6,packed-s2,packed-r4,packed-r8,packed-r12,packed-s2-nosync-r3,packed-s2-nosync-r6
TILEGRAPH_CACHE_DIR=/tmp/c12 TRITON_CACHE_DIR=/tmp/t12 t 12-gluon-ring-2048-22layers 200 python3 research/probe_gluon_stack.py --widths 2048 --layers 22 --variants $V
TILEGRAPH_CACHE_DIR=/tmp/c13 TRITON_CACHE_DIR=/tmp/t13 t 13-gluon-ring-4096 170 python3 research/probe_gluon_stack.py --widths 4096 --variants packed-s2-r2,packed-s2-r3,packed-s2-r4,packed-s2,packed-r4,packed-r6,packed

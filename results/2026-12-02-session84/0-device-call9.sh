#!/bin/bash
# session 84, call 9 (one H200): issue 17's single-projection grid in fp16 and fp32 (the
# bf16 grid ran in session 83), untuned shapes (tg.linear's rule timed against cuBLAS).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c20 TRITON_CACHE_DIR=/tmp/t20 t 20-decode-grid-fp16 230 python3 -m tilegraph bench decode-grid --dtype fp16 --out /tmp/d20 --format md,json
cp /tmp/d20/decode-grid.md $OUT/20-decode-grid-fp16.md 2>/dev/null
TILEGRAPH_CACHE_DIR=/tmp/c21 TRITON_CACHE_DIR=/tmp/t21 t 21-decode-grid-fp32 250 python3 -m tilegraph bench decode-grid --dtype fp32 --out /tmp/d21 --format md,json
cp /tmp/d21/decode-grid.md $OUT/21-decode-grid-fp32.md 2>/dev/null

#!/bin/bash
# session 83, call 3 (one H200): where issue 17's single-projection grid (bf16, the issue's
# nine shapes, 1-16 rows) and issue 20's attention grid at 8192 cached positions stand on
# today's tree; and what Gluon (Hopper TMA, mbarriers, warp specialisation) Triton 3.6 offers,
# for a persistent layer kernel (notes/decode.md, session 67).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt
t 6-gluon-api 30 python3 -c "
import triton, triton.experimental.gluon as g, triton.experimental.gluon.language as gl
print('triton', triton.__version__)
print('gluon', sorted(n for n in dir(gl) if not n.startswith('_')))
import triton.experimental.gluon.language.nvidia.hopper as h
print('hopper', sorted(n for n in dir(h) if not n.startswith('_')))
for sub in ('tma', 'mbarrier'):
    m = getattr(h, sub, None)
    print(sub, sorted(n for n in dir(m) if not n.startswith('_')) if m else None)
"
TILEGRAPH_CACHE_DIR=/tmp/c7 TRITON_CACHE_DIR=/tmp/t7 t 7-decode-grid-bf16 300 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/d7 --format md,json
cp /tmp/d7/*.md $OUT/7-decode-grid-bf16.md 2>/dev/null
TILEGRAPH_CACHE_DIR=/tmp/c8 TRITON_CACHE_DIR=/tmp/t8 t 8-attention-grid-bf16-8192 200 python3 -m tilegraph bench attention-grid --dtype bf16 --contexts 8192 --rows 1,4 --out /tmp/d8 --format md,json
cp /tmp/d8/*.md $OUT/8-attention-grid-bf16-8192.md 2>/dev/null

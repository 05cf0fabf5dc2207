#!/bin/bash
# session 83, call 4 (one H200): the decode grid's new `kernel` column (what tg.linear's plain
# call ran; * in the console where it fell back to cuBLAS) and summary count, on three
# shapes; the GPU runs of the grid's tests.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c9 TRITON_CACHE_DIR=/tmp/t9 t 9-decode-grid-kernel-column 100 python3 -m tilegraph bench decode-grid --dtype bf16 --rows 1,4,16 --shapes 8192x8192,14336x4096,2048x2048 --out /tmp/d9 --format md,json
cp /tmp/d9/decode-grid.md $OUT/9-decode-grid-kernel-column.md 2>/dev/null
TILEGRAPH_CACHE_DIR=/tmp/c10 TRITON_CACHE_DIR=/tmp/t10 t 10-gpu-tests-grid 90 python3 -m pytest -q -n 4 tests/test_bench.py tests/test_cli.py -k "decode_grid"

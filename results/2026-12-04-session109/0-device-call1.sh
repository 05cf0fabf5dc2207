#!/bin/bash
# Session 109 call 1: 2-16 rows with K split inside the program (research/probe_rows_in_program.py)
# against the rule and cuBLAS, weights rotated past L2, PDL on.
export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-cache TRITON_CACHE_DIR=/tmp/tr-cache
P=research/probe_rows_in_program.py
run() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt
run 1-bf16-rows8 230 python3 $P --rows 8 --shapes 2048x2048,1024x1024,5632x2048,2048x5632,2560x2048,4096x4096
run 2-bf16-rows-2-16 90 python3 $P --rows 2,4,16 --shapes 2048x2048,1152x896
run 3-fp32-rows8 100 python3 $P --dtype float32 --rows 8 --shapes 1024x1024,1280x1280,2048x2048
run 4-bf16-more 80 python3 $P --rows 8 --shapes 896x4864,1152x896,3072x3072
cd $OUT && tar czf all.tgz *.txt && rm *.txt

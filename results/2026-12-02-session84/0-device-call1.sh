#!/bin/bash
# session 84, call 1 (one H200): first GPU run of research/probe_gluon_stack.py (the persistent
# one-row stack with TMA rings in Gluon), each width alone so a hang at one leaves the other.
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt
python3 -c "import triton, torch; print(triton.__version__, torch.__version__)" >> $OUT/0-gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 1-gluon-stack-2048 170 python3 research/probe_gluon_stack.py --widths 2048 --variants nosync,ring,ring-half,ring-w8
TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 t 2-gluon-stack-4096 170 python3 research/probe_gluon_stack.py --widths 4096 --variants nosync,ring,ring-half,ring-w8

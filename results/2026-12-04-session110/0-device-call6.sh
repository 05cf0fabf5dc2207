#!/bin/bash
# Session 110, call 6: the tuner's new candidates (the merge apart released at attention's
# exit): decode-attention GPU tests; the attention grid as call 4 ran it (bf16, batch 1 and 4,
# 8192 positions); shapes no issue names (fp16, batch 3, 5000 positions). (The first attempt,
# which also ran the tree before on those, lost its machine; cut to fit the time left.)
set -u
{ command -v patch; PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 150 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider tests/test_decode_attention.py; echo "rc=$?"; } > $OUT/1-gpu-tests.txt 2>&1
grid() {  # name, src, cache, args...
  local name=$1 src=$2 cache=$3; shift 3
  { echo "\$ tilegraph bench attention-grid $*"
    COLUMNS=220 PYTHONPATH=$src TILEGRAPH_CACHE_DIR=$cache TRITON_CACHE_DIR=$cache-tr timeout $TIME python3 -m tilegraph bench attention-grid "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1
}
TIME=200 grid 2-grid-bf16 $PWD/src /tmp/tg-g --dtype bf16 --rows 1,4 --contexts 8192
TIME=110 grid 3-offlist $PWD/src /tmp/tg-a --dtype fp16 --rows 3 --contexts 5000
cd $OUT && tar czf all.tgz *.txt && rm *.txt

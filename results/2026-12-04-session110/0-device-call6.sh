#!/bin/bash
# Session 110, call 6: the tuner's new candidates (the merge apart released at attention's
# exit): decode-attention GPU tests; the attention grid as call 4 ran it (bf16, batch 1 and 4,
# 8192 positions); shapes no issue names (fp16, batch 3, 5000 positions) on the tree before
# (s110-release.patch reversed) and this one, each its own caches.
set -u
{ command -v patch; PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 150 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider tests/test_decode_attention.py; echo "rc=$?"; } > $OUT/1-gpu-tests.txt 2>&1
grid() {  # name, src, cache, args...
  local name=$1 src=$2 cache=$3; shift 3
  { echo "\$ tilegraph bench attention-grid $*"
    COLUMNS=220 PYTHONPATH=$src TILEGRAPH_CACHE_DIR=$cache TRITON_CACHE_DIR=$cache-tr timeout 250 python3 -m tilegraph bench attention-grid "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1
}
grid 2-grid-bf16 $PWD/src /tmp/tg-g --dtype bf16 --rows 1,4 --contexts 8192
rm -rf /tmp/B && mkdir -p /tmp/B && cp -r src /tmp/B/
if (cd /tmp/B && patch -s -p1 -R < $OLDPWD/results/2026-12-04-session110/s110-release.patch) > $OUT/3-before-check.txt 2>&1 \
   && ! grep -q RELEASE_AT_EXIT /tmp/B/src/tilegraph/kernels/decode_attention.py; then
  grid 3-offlist-before /tmp/B/src /tmp/tg-b --dtype fp16 --rows 3 --contexts 5000
else echo "the tree before could not be made" >> $OUT/3-before-check.txt; fi
grid 4-offlist-after $PWD/src /tmp/tg-a --dtype fp16 --rows 3 --contexts 5000
cd $OUT && tar czf all.tgz *.txt && rm *.txt

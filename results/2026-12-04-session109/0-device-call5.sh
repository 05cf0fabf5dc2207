#!/bin/bash
# Session 109 call 5 (the budget's last minutes): the tensor-core kernel's first weight tile
# sent to shared memory after PDL's wait (_dot_rows.W_AFTER_WAIT, an opaque register copy
# after the wait) against before it (the tree: its stores wait for the tile's loads, and
# the wait and the next kernel's release wait for them). A = the tree, B = W_AFTER_WAIT on.
set -u
rm -rf /tmp/B && mkdir -p /tmp/B && cp -r src /tmp/B/src \
  && sed -i 's/^W_AFTER_WAIT = False/W_AFTER_WAIT = True/' /tmp/B/src/tilegraph/kernels/_dot_rows.py
grep -n "^W_AFTER_WAIT" /tmp/B/src/tilegraph/kernels/_dot_rows.py > $OUT/0-check.txt
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
for v in A B; do
  [ $v = A ] && s=$PWD/src || s=/tmp/B/src
  t 1-stacks-$v 60 $s python3 -m tilegraph bench stack-grid --dtype bf16 --widths 2048,3072 --rows 8 --format md --out /tmp/s-$v
  t 2-grid-$v 50 $s python3 -m tilegraph bench decode-grid --dtype bf16 --rows 8 --shapes 2048x2048,2048x5632 --out /tmp/g-$v
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

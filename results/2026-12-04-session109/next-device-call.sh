#!/bin/bash
# For the next session (not run): where the 8-row whole-slice tile's 4.2 us go
# (research/probe_rows_timeline.py: %globaltimer at each phase of every program, in a
# captured chain of dependent links, beside tg.linear's time a link). About 1 minute.
set -u
export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t
for rows in 8 2 16; do
  for shape in 2048x2048 4096x4096 1024x1024; do
    { echo "\$ probe_rows_timeline.py --rows $rows --shape $shape"
      timeout 40 python3 research/probe_rows_timeline.py --rows $rows --shape $shape; echo "rc=$?"; } \
      >> $OUT/1-timeline.txt 2>&1
  done
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

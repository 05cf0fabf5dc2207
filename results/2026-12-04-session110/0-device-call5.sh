#!/bin/bash
# Session 110, call 5: the attention timeline again with the merge's SMs and the spread of its
# programs, and with attention releasing the merge only as its programs exit
# (TG_RELEASE_AT_EXIT=1, research/attention_timeline.py).
set -u
rm -rf /tmp/st && mkdir -p /tmp/st && cp -r src /tmp/st/ && python3 research/attention_timeline.py patch /tmp/st/src > $OUT/1-timeline.txt 2>&1
export TILEGRAPH_CACHE_DIR=/tmp/tg-s TRITON_CACHE_DIR=/tmp/tr-s
for point in "--shape 32/8x128 --context 8192" "--shape 28/4x128 --context 8192" "--shape 32/8x64 --batch 4 --context 2048" "--shape 14/2x64 --context 32768"; do
  for late in 0 1; do
    { echo "\$ TG_RELEASE_AT_EXIT=$late attention_timeline.py run $point"
      TG_RELEASE_AT_EXIT=$late PYTHONPATH=/tmp/st/src timeout 60 python3 research/attention_timeline.py run $point; echo "rc=$?"; } >> $OUT/1-timeline.txt 2>&1
  done
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

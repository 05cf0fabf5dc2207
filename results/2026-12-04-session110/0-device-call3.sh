#!/bin/bash
# Session 110, call 3: decode attention's fixed cost a call with each run's first 1-2 tiles
# read into registers before the wait (attention_config preload), with and without the
# merge apart releasing the next call early (TG_MERGE_EARLY, research/
# attention_overlap_variants.py), beside a copy of as many bytes (the yardstick).
set -u
rm -rf /tmp/pa && mkdir -p /tmp/pa && cp -r src /tmp/pa/ && python3 research/attention_overlap_variants.py /tmp/pa/src > $OUT/0-patch.txt 2>&1
export PYTHONPATH=/tmp/pa/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-a TRITON_CACHE_DIR=/tmp/tr-a
for early in 0 1; do
  { echo "\$ TG_MERGE_EARLY=$early attention_fixed_cost.py --preloads 0,1,2 --shapes 28/4x128,32/8x128,14/2x64 --contexts 4096,8192,16384,32768"
    TG_MERGE_EARLY=$early timeout 170 python3 research/attention_fixed_cost.py --preloads 0,1,2 \
      --shapes 28/4x128,32/8x128,14/2x64 --contexts 4096,8192,16384,32768; echo "rc=$?"
    echo "\$ TG_MERGE_EARLY=$early attention_fixed_cost.py --preloads 0,1,2 --batch 4 --shapes 32/8x64 --contexts 1024,2048,4096,8192"
    TG_MERGE_EARLY=$early timeout 70 python3 research/attention_fixed_cost.py --preloads 0,1,2 \
      --batch 4 --shapes 32/8x64 --contexts 1024,2048,4096,8192; echo "rc=$?"
  } >> $OUT/1-preload.txt 2>&1
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

#!/bin/bash
# Session 110, call 2: decode attention calls that overlap more (research/
# attention_overlap_variants.py on a copy of src/): the run's tiles prefetched into L2 before
# the wait (TG_PREFETCH_RUN), the merge apart releasing the next call before its wait
# (TG_MERGE_EARLY); each variant's fixed cost a call (research/attention_fixed_cost.py).
set -u
rm -rf /tmp/pa && mkdir -p /tmp/pa && cp -r src /tmp/pa/ && python3 research/attention_overlap_variants.py /tmp/pa/src > $OUT/0-patch.txt 2>&1
export PYTHONPATH=/tmp/pa/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-a TRITON_CACHE_DIR=/tmp/tr-a
for v in "0 0" "64 0" "0 1" "64 1"; do
  set -- $v
  { echo "\$ TG_PREFETCH_RUN=$1 TG_MERGE_EARLY=$2 attention_fixed_cost.py --shapes 28/4x128,32/8x128,14/2x64 --contexts 4096,8192,16384,32768"
    TG_PREFETCH_RUN=$1 TG_MERGE_EARLY=$2 timeout 100 python3 research/attention_fixed_cost.py \
      --shapes 28/4x128,32/8x128,14/2x64 --contexts 4096,8192,16384,32768; echo "rc=$?"
    echo "\$ TG_PREFETCH_RUN=$1 TG_MERGE_EARLY=$2 attention_fixed_cost.py --batch 4 --shapes 32/8x64 --contexts 1024,2048,4096,8192"
    TG_PREFETCH_RUN=$1 TG_MERGE_EARLY=$2 timeout 50 python3 research/attention_fixed_cost.py \
      --batch 4 --shapes 32/8x64 --contexts 1024,2048,4096,8192; echo "rc=$?"
  } >> $OUT/1-variants.txt 2>&1
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

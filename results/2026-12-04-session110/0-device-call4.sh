#!/bin/bash
# Session 110, call 4: (1) the GPU tests of the bench and CLI (the attention grid's plain
# pass); (2) the attention grid at bf16, batch 1 and 4, 8192 positions, with the plain pass;
# (3) where a few-pair call's fixed cost goes (research/attention_timeline.py, stamps on a
# patched copy of src/).
set -u
export TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t
{ PYTHONPATH=$PWD/src timeout 200 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider tests/test_bench.py tests/test_cli.py; echo "rc=$?"; } > $OUT/1-gpu-tests.txt 2>&1
{ echo "\$ tilegraph bench attention-grid --dtype bf16 --rows 1,4 --contexts 8192"
  COLUMNS=220 PYTHONPATH=$PWD/src timeout 240 python3 -m tilegraph bench attention-grid --dtype bf16 --rows 1,4 --contexts 8192 --out $OUT/grid --format md; echo "rc=$?"; } > $OUT/2-attention-grid.txt 2>&1
cp $OUT/grid/attention-grid.md $OUT/2-attention-grid-md.txt 2>/dev/null; rm -rf $OUT/grid
rm -rf /tmp/st && mkdir -p /tmp/st && cp -r src /tmp/st/ && python3 research/attention_timeline.py patch /tmp/st/src > $OUT/3-timeline.txt 2>&1
export TILEGRAPH_CACHE_DIR=/tmp/tg-s TRITON_CACHE_DIR=/tmp/tr-s
for point in "--shape 28/4x128 --context 8192" "--shape 32/8x128 --context 8192" "--shape 14/2x64 --context 32768" "--shape 32/8x64 --batch 4 --context 2048" "--shape 32/8x64 --batch 4 --context 2048 --in-kernel" "--shape 28/4x128 --context 32768"; do
  { echo "\$ attention_timeline.py run $point"
    PYTHONPATH=/tmp/st/src timeout 60 python3 research/attention_timeline.py run $point; echo "rc=$?"; } >> $OUT/3-timeline.txt 2>&1
done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

# For the next session (not run): is research/norm_value_in_the_epilogue.diff a loss on
# Qwen2-0.5B or did call 5 meet the step tuner's spread? Three processes a tree, each with
# fresh caches, alternating: the landed tree (A) and the tree with the diff (B), TinyLlama
# and Qwen2-0.5B at batch 1 (about 8 minutes).
set -u
R=$PWD
rm -rf /tmp/B && mkdir -p /tmp/B && cp -r src /tmp/B/src \
  && (cd /tmp/B && patch -s -p1 < $R/research/norm_value_in_the_epilogue.diff)
t() { name=$1; src=$2
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { timeout 110 python3 research/time_generator.py $name tinyllama,qwen2-0.5b; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
for round in 1 2; do t A$round $PWD/src; t B$round /tmp/B/src; done
cd $OUT && tar czf all.tgz *.txt && rm *.txt

# Session 109 call 3: session 108's next-device-call.sh as it was written (norm value in the
# epilogue, A = the tree, B = the tree with research/norm_value_in_the_epilogue.diff, two rounds).
set -u
R=$PWD
rm -rf /tmp/B && mkdir -p /tmp/B && cp -r src /tmp/B/src \
  && (cd /tmp/B && patch -s -p1 < $R/research/norm_value_in_the_epilogue.diff)
t() { name=$1; src=$2
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { timeout 110 python3 research/time_generator.py $name tinyllama,qwen2-0.5b; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
for round in 1 2; do t A$round $PWD/src; t B$round /tmp/B/src; done
nvidia-smi --query-gpu=name --format=csv > $OUT/0-gpu.txt
cd $OUT && tar czf all.tgz *.txt && rm *.txt

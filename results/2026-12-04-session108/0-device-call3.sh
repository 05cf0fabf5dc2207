# Session 108, call 3 (about 8 minutes): issue 20's demos with the norms folded (each checks
# tg.Generator against transformers first), then the GPU-marked tests of test_llama and
# test_generate that call 2's shards did not reach, then TinyLlama at batch 8.
set -u
t() { name=$1; limit=$2; shift 2
  export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
D="demo --variants tilegraph --no-sweeps"
t 1-demo-tinyllama-b1 100 python3 -m tilegraph $D --model tinyllama --batch 1 --out /tmp/d1
t 2-demo-qwen2-b1 100 python3 -m tilegraph $D --model qwen2-0.5b --batch 1 --out /tmp/d2
for i in 0 1 2 3; do
  ( export SHARD=$i/4 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 180 python3 -m pytest -q -p shard -p no:cacheprovider -m gpu tests/test_llama.py \
      tests/test_generate.py > $OUT/3-tests-shard$i.txt 2>&1
    echo "rc=$?" >> $OUT/3-tests-shard$i.txt ) &
done
wait
t 4-demo-tinyllama-b8 130 python3 -m tilegraph $D --model tinyllama --batch 8 --new-tokens 32 --prompt-tokens 32 --max-seq 128 --out /tmp/d4
cd $OUT && tar czf all.tgz *.txt && rm *.txt

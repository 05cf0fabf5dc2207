# Session 108, call 2 (about 9 minutes): norm weights of one value (stride 0) read once by the
# decode kernels, and Llama's layer norms folded into wqkv / w_gate_up (fold-norms.patch).
# 1. The GPU tests of what it touches, 8 shards on the one GPU.
# 2. tg.Generator at batch 1, the tree before (this call's copy with the patch reversed)
#    against this tree, each with its own caches.
set -u
S=$PWD/results/2026-12-04-session108
for i in 0 1 2 3 4 5 6 7; do
  ( export SHARD=$i/8 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 220 python3 -m pytest -q -p shard -p no:cacheprovider tests/test_norm_weight.py \
      tests/test_llama.py tests/test_norm_handoff.py tests/test_linear_qkv.py \
      tests/test_linear.py tests/test_generate.py > $OUT/1-tests-shard$i.txt 2>&1
    echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src /tmp/A/src && (cd /tmp/A && patch -s -p1 -R < $S/fold-norms.patch)
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg$src TRITON_CACHE_DIR=/tmp/tr$src
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
M=tinyllama,d1024-h128
t 2-before 150 /tmp/A/src python3 research/time_generator.py before $M
t 3-tree 150 $PWD/src python3 research/time_generator.py tree $M
cd $OUT && tar czf all.tgz *.txt && rm *.txt

# Session 108, call 5 (about 4 minutes): the one-row GEMV scaling its result by a norm
# weight's one value rather than x (its tiles as call 1's upper bound: TinyLlama's small
# tiles 64 -> 56 registers). tests/test_norm_weight.py on the GPU, then tg.Generator at batch
# 1 (call 2's tree: TinyLlama 0.6804 ms a token; call 1's upper bound: Qwen2-0.5B 0.4800-0.4804).
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg TRITON_CACHE_DIR=/tmp/tr
{ timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_norm_weight.py; echo "rc=$?"; } > $OUT/1-tests.txt 2>&1
export PYTHONPATH=$PWD/src:$PWD/research
{ timeout 170 python3 research/time_generator.py scaled tinyllama,qwen2-0.5b; echo "rc=$?"; } > $OUT/2-time.txt 2>&1
cd $OUT && tar czf all.tgz *.txt && rm *.txt

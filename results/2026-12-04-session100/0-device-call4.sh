# Session 100 call 4: the x-left tile (BN 32, BK 128, three stages) forced onto the gate/up
# projection of whole Llama-family decode steps at 4-16 rows, against the rule's
# (research/probe_model_tiles.py --only BK128): does its win alone hold in the step?
set -u
export PYTHONPATH=$PWD/src:$PWD/research TRITON_CACHE_DIR=/tmp/tr-call4
run() { name=$1; shift
  export TILEGRAPH_CACHE_DIR=/tmp/tg-$name
  { echo "\$ python3 research/probe_model_tiles.py $*"; timeout 100 python3 research/probe_model_tiles.py "$@" --only BK128; echo "rc=$?"; } >> $OUT/9-model-tiles.txt 2>&1; }
run a --model tinyllama --batch 8
run b --model tinyllama --batch 4
run c --model tinyllama --batch 16
run d --model qwen2-0.5b --batch 8
run e --model llama3.2-1b --batch 8
run f --model qwen2-0.5b --batch 8 --set hidden_size=1536 intermediate_size=8960 num_attention_heads=12 num_key_value_heads=2 num_hidden_layers=28
run g --model llama3-8b --batch 8

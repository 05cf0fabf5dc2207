# Session 96, call 5 (run as one command line): the TinyLlama batch-8 demo on this tree.
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg21 TRITON_CACHE_DIR=/tmp/tr21
{ echo '$ python3 -m tilegraph demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps'
  timeout 200 python3 -m tilegraph demo --model tinyllama --batch 8 --variants tilegraph --no-sweeps --out /tmp/demo21
  echo rc=$?; } > $OUT/21-demo-tinyllama-b8.txt 2>&1

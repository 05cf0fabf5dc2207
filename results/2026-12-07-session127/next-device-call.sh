#!/bin/bash
# For session 128: GPT-Neo's and CodeGen's tests through the kernels (session 127 added
# them after its one device call); GPT-2's, OPT 1.3B's and GPT-Neo 1.3B's demos at batch 1
# against transformers' hand-captured graph on the tree as landed (each its own process);
# then
# with hand-graph-sync-check.diff applied, TinyLlama's hand graph must still capture
# (the check must not call a step that captures cleanly unavailable) and GPT-2's and
# OPT's must end as "unavailable", their tilegraph rows measured. Timeouts sum to ~540 s.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
D=results/2026-12-07-session127
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 90 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 4 \
  tests/test_llama.py tests/test_generate.py -k "gpt_neo or codegen or learned" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$?" >> $OUT/0-gpu.txt
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
}
demo gpt2 60 --model gpt2 --batch 1 --variants hf-graph,tilegraph
demo opt1.3b 80 --model opt-1.3b --batch 1 --variants hf-graph,tilegraph
demo neo1.3b 80 --model gpt-neo-1.3b --batch 1 --variants hf-graph,tilegraph
git apply $D/hand-graph-sync-check.diff && echo "sync check applied" >> $OUT/0-gpu.txt
demo B-tinyllama 90 --model tinyllama --batch 1 --variants hf-graph,tilegraph
demo B-gpt2 60 --model gpt2 --batch 1 --variants hf-graph,tilegraph
demo B-opt1.3b 80 --model opt-1.3b --batch 1 --variants hf-graph,tilegraph
git apply -R $D/hand-graph-sync-check.diff
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true

#!/bin/bash
# Written in session 111, not run (no device lent after call 1). (a) scope-scratch.diff: tg.scope
# on a GPU refused the scratch a tilegraph op allocates inside itself (a norm's rows before the
# tensor-core kernel, a two-kernel decode layer's q); its ops now reach the refusal as custom
# ops. capture-spare-workspace.diff:
# a capture on a stream with no split-K workspace (PyTorch's recipe: warm up on one stream,
# torch.cuda.graph captures on another; tg.scope after a warm-up on the caller's stream) takes
# a zeroed spare instead of running split-K plans unsplit. Its GPU tests, and
# research/probe_plain_chain.py (chains captured that way) on the tree and with the diff:
# call 1 timed plain tg.linear chains of fp32 8-row projections at 1280^2 12.4 us a link and
# 1536^2 17.8, where decode-grid timed the split plan alone at about 5.5 us at 1280^2.
# (b) OpenLLaMA-3B's shape (3200 wide, heads of 100, no GQA), if time is left.
set -u
S=results/2026-12-04-session111
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
rm -rf /tmp/B && mkdir -p /tmp/B && cp -r src tests research /tmp/B/ && (cd /tmp/B && patch -s -p1 < $ROOT/$S/scope-scratch.diff && patch -s -p1 < $ROOT/$S/capture-spare-workspace.diff) || echo "patch failed" > $OUT/0-patch.txt
(cd /tmp/B && PYTHONPATH=/tmp/B/src TILEGRAPH_CACHE_DIR=/tmp/tg-t TRITON_CACHE_DIR=/tmp/tr-t timeout 150 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests/test_decode_plan.py tests/test_decode_attention.py tests/test_capture.py tests/test_side_effects.py -k "split or spare or scope or chain or another_stream or scratch"; echo "rc=$?") > $OUT/1-tests-B.txt 2>&1
chain() {  # name, tree
  (echo "\$ research/probe_plain_chain.py --shapes 1280x1280,1536x1536,2048x2048 --rows 8 ($2)"
   cd $2 && PYTHONPATH=$2/src TILEGRAPH_CACHE_DIR=/tmp/tg-$1 TRITON_CACHE_DIR=/tmp/tr-$1 timeout 120 python3 research/probe_plain_chain.py --shapes 1280x1280,1536x1536,2048x2048 --rows 8; echo "rc=$?") > $OUT/$1.txt 2>&1
}
chain 2-chain-A $ROOT
chain 3-chain-B /tmp/B
{ echo "\$ tilegraph demo --model $S/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256"
  COLUMNS=200 PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-c TRITON_CACHE_DIR=/tmp/tr-c timeout 200 python3 -m tilegraph demo --model $S/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256 --out $OUT/demo; echo "rc=$?"; } > $OUT/4-openllama.txt 2>&1
cp $OUT/demo/*.json $OUT/ 2>/dev/null
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo

#!/bin/bash
# Session 136, call 2: sigmoid routes chosen with a bias an expert (MiniMax-M2, Solar Open)
# in both expert kernels. The MoE GPU tests with the two new families; the probe at 1 and 8
# rows (the softmax routes' code moved: same arithmetic, timed against call 1's); whole
# steps of Solar Open (6 of its 48 layers) and MiniMax-M2 (3 of 62), random weights from
# configs/, at batch 1 and 8 (the whole models do not fit one GPU).
set -u
export TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-560} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
python3 -c "import transformers; print('transformers', transformers.__version__)" >> $OUT/0-log.txt
PYTHONPATH=src timeout 170 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py tests/test_llama.py tests/test_generate.py \
  -k "experts or mixtral or qwen2-moe or qwen3-moe or olmoe or granitemoe or gpt-oss or minimax or solar" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=src timeout 80 python3 -u research/probe_experts.py --rows 1,8 > $OUT/2-probe.txt 2>&1
echo "probe rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
export PYTHONPATH=src
C=results/2026-12-07-session136/configs
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  if [ $(left) -lt $limit ]; then limit=$(left); fi
  if [ $limit -lt 40 ]; then echo "$name skipped ($(left) s left)" >> $OUT/0-log.txt; return; fi
  echo "=== $name: $*" >> $OUT/demos.txt
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" \
    >> $OUT/demos.txt 2>&1
  echo "$name rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
  tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null   # (kept if a later step is cut off)
}
demo solar-b1-8 170 --model $C/solar-open-6l --batch 1,8 --variants tilegraph
demo minimax-b1-8 170 --model $C/minimax-m2-3l --batch 1,8 --variants tilegraph
true

#!/bin/bash
# Session 135, call 2 (call 1 was session 134's next-device-call.sh, whose probes broke
# on the layer's missing biases): the probe's layouts on the branch (by-expert-routes)
# and on session 133's tree (baseline/src, made before the call by
#     mkdir -p baseline && git archive 64fe2a4 src | tar -x -C baseline),
# then Qwen2-0.5B's step at batch 1 if time is left (call 1's cold build ran past 70 s).
set -u
export TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-400} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
PYTHONPATH=src timeout 170 python3 -u research/probe_experts.py --rows 2,4,8,16,32 --layouts \
  > $OUT/2-probe-new.txt 2>&1
echo "probe new rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
PYTHONPATH=baseline/src timeout 80 python3 -u research/probe_experts.py --rows 4,16 \
  --layouts > $OUT/3-probe-old.txt 2>&1
echo "probe old rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
limit=$(left)
if [ $limit -ge 60 ]; then
  PYTHONPATH=src timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/qwen2-b1 \
    --model qwen2-0.5b --batch 1 --variants tilegraph > $OUT/demos.txt 2>&1
  echo "qwen2-b1 rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
  tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
fi
true

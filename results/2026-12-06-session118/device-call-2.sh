#!/bin/bash
# Session 118's second device call (about nine minutes; timeout 590): session 116's prologue
# add timed (Gemma 3 1B and Gemma 2 2B, the normed outputs added in the next projection's
# prologue and apart), Qwen2-0.5B on this tree against session 115's (no change where nothing
# is added or normalised), Gemma 3 1B's batch-8 profile, Phi-3-mini's demo at batch 1. Each
# part writes its file into $OUT as it ends; none starts after 470 s.
set -u
DEADLINE=$(( $(date +%s) + 470 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-05-session117
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
left norms-apart && (run timeout 110 python3 research/time_generator.py s118 gemma3-1b,gemma2-2b 128 2048 1 bands,norms-apart; echo "rc=$?") > $OUT/4-norms-apart.txt 2>&1
if left trees; then
  rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src research /tmp/A/ && (cd /tmp/A && patch -R -s -p1 < $ROOT/$S/src-since-session-115.diff) || echo "patch failed" >> $OUT/5-trees.txt
  for tree in $ROOT /tmp/A; do
    (cd $tree && PYTHONPATH=$tree/src TILEGRAPH_CACHE_DIR=/tmp/tg-$(basename $tree) TRITON_CACHE_DIR=/tmp/tr-$(basename $tree) timeout 60 python3 research/time_generator.py $(basename $tree) qwen2-0.5b; echo "rc=$?") 2>&1 | grep "ms a token\|rc=\|Error" >> $OUT/5-trees.txt
  done
fi
left profile-b8 && (run timeout 150 python3 research/profile_llama_decode.py --model gemma3-1b --batch 8; echo "rc=$?") > $OUT/6-profile-gemma3-1b-b8.txt 2>&1
left phi3 && { echo "\$ tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 run timeout 120 python3 -m tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out /tmp/demo-phi3 | tail -20
  echo "rc=${PIPESTATUS[0]}"; } > $OUT/7-phi3-mini.txt 2>&1
true

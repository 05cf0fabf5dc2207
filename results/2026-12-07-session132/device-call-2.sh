#!/bin/bash
# Session 132, call 2: research/probe_experts.py (call 1's run lacked shared_experts in its
# config): the expert kernels beside the plain path's gather at 1 and 8 rows on OLMoE's,
# Qwen3-30B-A3B's and Mixtral's shapes, and other block shapes at one row (--blocks).
set -u
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
timeout 100 python3 research/probe_experts.py --rows 1,8 > $OUT/1-probe.txt 2>&1
echo "probe rc=$?" >> $OUT/0-log.txt
timeout 120 python3 research/probe_experts.py --rows 1 --blocks > $OUT/2-blocks.txt 2>&1
echo "blocks rc=$?" >> $OUT/0-log.txt

# Session 104 call 1 (written in session 103): about 9.5 minutes (stage limits
# 50/50/50/60/60/60/130/60/45). Session 103's last commit makes fp32's weight-left tile five tiles
# deep only where its programs fit two an SM (three where more); the five-stage tile was
# timed everywhere in call 5, the three-stage one is the tree before's, but the tree with
# both was not run. session103-rule.patch is every change to decode_plan.py since session 102.
# 1. the fp32 GPU tests the rule touches.
# 2-3. whole fp32 stacks at 8 rows, tree and before (session103-rule.patch reverse-applied):
#    one wave at five stages (1536, 2560, 4096) and more programs than two an SM (6144: 384;
#    9216: 288) at three.
# 4. the bound between, forced: 6144 and 9216 at 8 rows, three against five stages at splits
#    2 and 4 (the rule: 6144 split 4, 384 programs; 9216 split 2, 288).
# 5-6. lone fp32 off the list at 5 and 12 rows, tree and before.
# 7. TinyLlama fp32 batch 8 (call 3 of session 103: 1.830 ms a token, 53.3% of the floor,
#    3.86x hf-graph, before this rule).
# 8. Does bf16's weight-left tile gain from depth as fp32's did? Whole bf16 stacks at 8 rows,
#    d = 4096 and 8192: BLOCK_K 128 at three stages (the rule's) and four (100 KB: still two
#    programs an SM), BLOCK_K 64 at six.
# 9. `tilegraph demo --model DIR` (a checkpoint directory) on the GPU: its tests.
set -u
R=results/2026-12-04-session103
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && patch -s -R -p1 < $OLDPWD/$R/session103-rule.patch)
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
t 1-tests 50 $PWD/src python3 -m pytest -q -x tests/test_decode_plan.py tests/test_norm_handoff.py tests/test_layerstack.py tests/test_decode_stack.py -k "(weight_left or fp32 or float32 or tf32 or rule_by_rows) and not candidates" -p no:cacheprovider
G="bench stack-grid --dtype fp32 --widths 1536,2560,4096,6144,9216 --rows 8 --format md"
t 2-stacks-tree 50 $PWD/src python3 -m tilegraph $G --out /tmp/s2
t 3-stacks-before 50 /tmp/B/src python3 -m tilegraph $G --out /tmp/s3
t 4-stack-plans 60 $PWD/src python3 research/stack_plans.py fp32 6144x8,9216x8 64/64/3/2/4/0/1,64/64/5/2/4/0/1,64/64/3/4/4/0/1,64/64/5/4/4/0/1
O="research/probe_offlist_grid.py --dtype fp32 --rows 5,12 --shapes 2560x2560,3584x3584,5120x5120,6144x4096,9216x9216,11264x2048,1536x8960,28672x4096"
t 5-lone-tree 60 $PWD/src python3 $O
t 6-lone-before 60 /tmp/B/src python3 $O
t 7-demo-fp32-b8 130 $PWD/src python3 -m tilegraph demo --model tinyllama --dtype fp32 --batch 8 --variants tilegraph --no-sweeps --new-tokens 32 --prompt-tokens 32 --max-seq 128 --out /tmp/d7
t 8-stack-plans-bf16 60 $PWD/src python3 research/stack_plans.py bf16 4096x8,8192x8 64/128/3/0/4/0/1,64/128/4/0/4/0/1,64/64/6/0/4/0/1
t 9-tests-demo-dir 45 $PWD/src python3 -m pytest -q tests/test_cli.py tests/test_model_demo.py -k "checkpoint or demo_model or score_keeps" -p no:cacheprovider
cd $OUT && tar czf all.tgz *.txt && rm *.txt

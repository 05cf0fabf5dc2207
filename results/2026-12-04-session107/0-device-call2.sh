# Session 107, call 2 (about 3 minutes): step verdicts per row count (record_step_verdict).
# The GPU tests of the step tuners (test_generate: tuned plans at sizes (2,) and (3, 4), whole-
# slice K loops) and, on the GPU, test_decode_plan's tests of step / plain verdicts, 4 shards.
set -u
for i in 0 1 2 3; do
  ( export SHARD=$i/4 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103 \
      TILEGRAPH_CACHE_DIR=/tmp/tg-s$i TRITON_CACHE_DIR=/tmp/tr-s$i
    timeout 170 python3 -m pytest -q -p shard -p no:cacheprovider tests/test_generate.py tests/test_decode_plan.py -k "tuned_projection or whole_slice or step_verdict or plain_verdict or lose_in_a_step or one_step" > $OUT/1-tests-shard$i.txt 2>&1; echo "rc=$?" >> $OUT/1-tests-shard$i.txt ) &
done
wait
cd $OUT && tar czf all.tgz *.txt && rm *.txt

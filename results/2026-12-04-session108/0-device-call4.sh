# Session 108, call 4 (about 4 minutes): the three GPU-marked tests call 3's shards did not
# reach before their limit, one process each.
set -u
i=0
for k in "tuned_projection_plans_are_checked_in_the_decode_step and sizes1" \
         "projection_variants_compile_before" "real_shape_greedy_tokens_equal_hf_in_fp32"; do
  ( export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-t$i TRITON_CACHE_DIR=/tmp/tr-t$i
    timeout 230 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_generate.py -k "$k" \
      > $OUT/1-test$i.txt 2>&1
    echo "rc=$?" >> $OUT/1-test$i.txt ) &
  i=$((i + 1))
done
wait
cd $OUT && tar czf all.tgz *.txt && rm *.txt

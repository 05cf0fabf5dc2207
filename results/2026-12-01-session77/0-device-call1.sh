#!/bin/bash
# session 77, call 1: where TinyLlama's batch-8 build goes, and whether the launch timed alone is picked
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
run() {  # name timeout batch variant [profile]
  local prof=()
  [ -n "$5" ] && prof=(-m cProfile -o /tmp/$1.prof)
  TILEGRAPH_CACHE_DIR=/tmp/c_$1 TRITON_CACHE_DIR=/tmp/t_$1 timeout $2 python3 "${prof[@]}" \
    research/time_generator.py $1 tinyllama 128 2048 $3 $4 > $OUT/$1.txt 2>&1
  echo "rc $?" >> $OUT/$1.txt
}
run b8bands 200 8 bands profile
run b8noalone 160 8 no-alone
run b4bands 105 4 bands
run b2bands 85 2 bands
timeout 20 python3 -c "
import pstats
s = pstats.Stats('/tmp/b8bands.prof'); s.sort_stats('cumulative').print_stats(70)
s.sort_stats('tottime').print_stats(25)" > $OUT/profile.txt 2>&1

# Session 97, call 6 (about 4 minutes): the split-K partials as one contiguous tile a program
# (research/contiguous_partials.diff, applied to a copy of src/ as "contiguous") against the
# library's (SPLIT_K, 16, N) workspace ("rows", a program's rows N * 4 bytes apart). Call 5:
# 2048^2's rule grew 4.41 -> 4.81 us from 14 to 16 rows where 1536^2 (rows 6 KB apart, not a
# power of two) grew 3.61 -> 3.73; session 94's probe kernel with contiguous tiles took 4.31
# at 16 rows where the library took 4.82.
# 17. probe_wide_rows (the rule's plan beside cuBLAS and its variants), rows A B A B.
# 18. bf16 stacks d = 1024, 2048, 3072 at 8 and 16 rows, rows then contiguous.
set -u
export PYTHONPATH=$PWD/src:$PWD/research
mkdir -p /tmp/B && cp -r src /tmp/B/ && (cd /tmp/B && (patch -p1 < $OLDPWD/research/contiguous_partials.diff || git apply $OLDPWD/research/contiguous_partials.diff)) > $OUT/17-apply.txt 2>&1
t() { name=$1; limit=$2; src=$3; shift 3; export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$(basename $(dirname $src))
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
P="python3 research/probe_wide_rows.py --shapes 2048x2048,1536x1536,4096x4096,2048x5632 --rows 8,16 --rounds 3"
t 17a-probe-rows 65 $PWD/src $P
t 17b-probe-contiguous 65 /tmp/B/src $P
t 17c-probe-rows 40 $PWD/src $P
t 17d-probe-contiguous 40 /tmp/B/src $P
S="python3 -m tilegraph bench stack-grid --dtype bf16 --widths 1024,2048,3072 --rows 8,16 --format md"
t 18a-stacks-rows 40 $PWD/src $S --out /tmp/s18a
t 18b-stacks-contiguous 40 /tmp/B/src $S --out /tmp/s18b

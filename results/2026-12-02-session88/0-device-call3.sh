# session 88, call 3: two-row persistent GEMV tiles at more programs an SM, with the weight tile widened for each row (WIDEN_W) and x kept 16-bit (NARROW_X)
set -u
export PYTHONPATH=$PWD/src:$PWD/research
t() { name=$1; limit=$2; shift 2; export TILEGRAPH_CACHE_DIR=/tmp/tg-$name TRITON_CACHE_DIR=/tmp/tr-$name
  { echo "\$ $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/0-gpu.txt
t 9-sweep-widen-grid-rows2 200 python3 research/sweep_gemv.py --out $OUT/sweep9 --persistent --grid --widen --rows 2 --only "grid 2048^2,grid 4096^2,grid 5632x2048,grid 14336x4096,off 11008x4096"
t 10-sweep-widen-decoders-rows2 220 python3 research/sweep_gemv.py --out $OUT/sweep10 --persistent --widen --rows 2 --only "tinyllama qkv,tinyllama o,tinyllama gate/up,llama3.2-1b qkv,llama3-8b o,qwen2-1.5b gate/up,qwen2-0.5b gate/up"
cd $OUT && tar czf extra.tgz sweep9 sweep10 2>/dev/null; rm -rf sweep9 sweep10; ls

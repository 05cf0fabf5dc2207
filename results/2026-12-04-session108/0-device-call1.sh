# Session 108, call 1 (about 6 minutes): what an RMSNorm folded into the next projection's
# weights (W * g, so the kernel loads no g and multiplies no x * g; the sum of squares kept)
# could save in tg.Generator at batch 1. Tree B is this tree with _gemv_inputs' g fixed at
# ones (the timing of a folded model; its results are not the model's). Registers for sm_90
# (research/decode_kernel_registers.py, Triton 3.6, here): Qwen2-0.5B's split tiles 91 -> 80,
# the small persistent tile 64 -> 56, TinyLlama's persistent gate/up 100 -> 80.
set -u
rm -rf /tmp/B && cp -r src /tmp/B && python3 - <<'PY'
p = '/tmp/B/tilegraph/kernels/_matvec.py'
s = open(p).read()
old = """    if HAS_NORM:
        g = tl.load(norm_w_ptr + k0 + cols, mask=k_mask, other=0.0).to(tl.float32)
    return x, g"""
assert old in s
open(p, 'w').write(s.replace(old, "    return x, g"))
PY
# each tree its own caches, the second run of a tree reading the first's choices
t() { name=$1; limit=$2; src=$3; shift 3
  export PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg$src TRITON_CACHE_DIR=/tmp/tr$src
  { echo "\$ PYTHONPATH=$src $*"; timeout $limit "$@"; echo "rc=$?"; } > $OUT/$name.txt 2>&1; }
M=qwen2-0.5b,tinyllama,d1024-h128
t 1-tree 170 $PWD/src python3 research/time_generator.py tree $M
t 2-folded 170 /tmp/B python3 research/time_generator.py folded $M
t 3-tree-again 60 $PWD/src python3 research/time_generator.py tree-again qwen2-0.5b
t 4-folded-again 60 /tmp/B python3 research/time_generator.py folded-again qwen2-0.5b
cd $OUT && tar czf all.tgz *.txt && rm *.txt

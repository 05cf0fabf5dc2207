#!/bin/bash
# Written in session 111, not run. For an nvidia-h200-x2 machine (with the tensor-parallel
# work): off-device-error.diff refuses, by name, an input on a CUDA device other than the
# current one (Triton launches on the current device, where another device's pointers
# fault); its test runs every public op with inputs on cuda:1, from cuda:0 (refused) and
# under torch.cuda.device(1) (runs). Then test_checks.py whole on the patched copy.
set -u
ROOT=$PWD
S=results/2026-12-04-session111
rm -rf /tmp/C && mkdir -p /tmp/C && cp -r src tests /tmp/C/ && (cd /tmp/C && patch -s -p1 < $ROOT/$S/off-device-error.diff) || echo "patch failed" > $OUT/0-patch.txt
(cd /tmp/C && PYTHONPATH=/tmp/C/src TILEGRAPH_CACHE_DIR=/tmp/tg-x TRITON_CACHE_DIR=/tmp/tr-x timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_checks.py; echo "rc=$?") > $OUT/1-checks.txt 2>&1
cd $OUT && tar czf all.tgz *.txt && rm -f *.txt

export TILEGRAPH_CACHE_DIR=/tmp/c7_$RANDOM
mkdir -p $OUT/r
PYTHONPATH=src timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_layerstack.py -k "gradients or fused" > $OUT/r/11-gpu-tests-layerstack.txt 2>&1
PYTHONPATH=src timeout 70 python3 -m tilegraph bench decode_layer --sizes 1024,2048 --variants tilegraph,"torch formula" --out $OUT/r/bench > $OUT/r/12-bench-decode-layer.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r

# Session 94, call 4 (the session's last 265 s of device time): a first look at split-K
# partials summed inside a thread-block cluster (research/probe_cluster_split.py).
set -u
export PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/tg9 TRITON_CACHE_DIR=/tmp/tr9
{ echo "\$ python3 research/probe_cluster_split.py --shapes 2048x2048 --rows 4,16 --rounds 2";
  timeout 110 python3 research/probe_cluster_split.py --shapes 2048x2048 --rows 4,16 --rounds 2; echo "rc=$?"; } > $OUT/9-probe-cluster-split.txt 2>&1

#!/bin/bash
# Session 128's last device time (~300 s): the ALiBi kernel and the BLOOM, MPT model tests
# through the kernels on a GPU, nothing else.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 140 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_decode_attention.py tests/test_llama.py tests/test_generate.py \
  -k "alibi or bloom or mpt" > $OUT/1-tests.txt 2>&1
echo "tests rc=$?" >> $OUT/0-gpu.txt

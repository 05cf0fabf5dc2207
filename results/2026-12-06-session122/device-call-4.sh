#!/bin/bash
# Session 122's last call (SUITE_S: the suite's seconds, 370 unless set): every gpu-marked test outside the model files (8 workers; call 3
# ran the whole suite in 3 workers and ran out of its 560 s at 401 passed), then the loading
# tests this session added or changed (multimodal wrappers, a stored LM head untying the
# config's tie, the demo over a Mistral 3 checkpoint) on the GPU under its transformers.
set -u
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
python3 -c "import transformers, torch, triton; print(transformers.__version__, torch.__version__, triton.__version__)" >> $OUT/0-gpu.txt 2>&1
timeout 150 python3 -m pytest -n 4 -q -rfE --tb=short -p no:cacheprovider \
  tests/test_llama.py tests/test_cli.py \
  -k "multimodal or unties or tied or checkpoint_directory or no_checkpoint" > $OUT/1-loading.txt 2>&1
echo "loading rc=$?" >> $OUT/0-gpu.txt
timeout ${SUITE_S:-370} python3 -m pytest -m gpu -n 8 -q -rfE --tb=short -p no:cacheprovider tests \
  --ignore=tests/test_llama.py --ignore=tests/test_generate.py > $OUT/2-gpu-suite.txt 2>&1
echo "suite rc=$?" >> $OUT/0-gpu.txt
true

# Two commands set everything up on a fresh machine: `make demo` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# A machine without an NVIDIA driver gets the CPU build of torch (a local wheel); never the
# multi-GB CUDA build.
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
COMMA   := ,
# Tests run on every core where there is no GPU (the interpreter is one Python thread a
# test: on 2 cores the suite took 15 minutes instead of 24); with a GPU in one process,
# so that GPU tests do not share the card. Idle workers take tests queued for the others
# (worksteal): a few tests of one to two minutes otherwise end the run on one worker (on 2
# cores, 22.5 -> 19.7 minutes, session 119).
TEST_WORKERS ?= $(if $(HAS_GPU),0,auto)
TEST_DIST    ?= $(if $(HAS_GPU),no,worksteal)

.PHONY: demo test lint bench install clean

demo: $(STAMP)
	$(VENV)/bin/tilegraph demo
	$(VENV)/bin/tilegraph demo --model $(if $(HAS_GPU),tinyllama --batch 1$(COMMA)8,tiny-llama3)

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist $(TEST_DIST)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

bench: $(STAMP)
	$(VENV)/bin/tilegraph bench --out out/bench --plot

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
ifneq ($(HAS_GPU),1)
	$(PY) -m pip install torch==2.13.0
endif
	$(PY) -m pip install -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) build src/*.egg-info

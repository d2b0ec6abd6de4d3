# The two commands a fresh machine needs: `make demo` and `make test`.
# Both create .venv (if missing), install recordkit into it (building the compiled
# kernels) and then run.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install build bench fuzz asan clean docs typecheck

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py $(shell find src -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' 2>/dev/null)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# PyTorch for the integration tests: the CPU build this machine kind keeps on disk (a plain
# `torch` would download a multi-GB CUDA build), with torchdata (StatefulDataLoader), installed in
# the same step so that torchdata finds this torch. Elsewhere: pip install 'recordkit[torch]'.
TORCH_STAMP := $(VENV)/.torch
$(TORCH_STAMP): $(STAMP)
	$(BIN)/python -c 'import torch, torchdata' 2>/dev/null || $(BIN)/python -m pip install --quiet $(TORCH_REQUIREMENT)
	touch $(TORCH_STAMP)
TORCH_REQUIREMENT ?= torch==2.13.0 torchdata==0.11.0

install: $(STAMP)

# Rebuild the compiled kernels in place after editing a .pyx file.
build: $(STAMP)
	$(BIN)/python setup.py --quiet build_ext --inplace

demo: $(STAMP)
	$(BIN)/recordkit demo

test: $(STAMP) $(TORCH_STAMP)
	$(BIN)/python -m pytest -q

# The documentation site (MkDocs Material + mkdocstrings) into site/; warnings are errors.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

# mypy over the public face (recordkit, recordkit.readers, recordkit.writers).
typecheck: $(STAMP)
	$(BIN)/python -m mypy

# Side by side with CNTK 2.7 where ../shared/tools/cntk-oracle is set up (see benchmarks/README.md).
bench: $(STAMP)
	$(BIN)/python benchmarks/ctf_throughput.py
	$(BIN)/python benchmarks/cbf_throughput.py
	$(BIN)/python benchmarks/minibatch_throughput.py
	$(BIN)/python benchmarks/bptt_throughput.py --skip-reference
	$(BIN)/python benchmarks/shuffle_quality.py

# Longer coverage-guided fuzzing (atheris); the short hypothesis fuzz tests run in `make test`.
FUZZ_SECONDS ?= 600
fuzz: $(STAMP)
	$(BIN)/python -m pip install --quiet atheris
	mkdir -p .fuzz/ctf .fuzz/cbf .fuzz/ofrecord .fuzz/singa
	$(BIN)/python fuzz/fuzz_ctf.py -max_total_time=$(FUZZ_SECONDS) .fuzz/ctf tests/fuzz/corpus/ctf
	$(BIN)/python fuzz/fuzz_cbf.py -max_total_time=$(FUZZ_SECONDS) .fuzz/cbf tests/fuzz/corpus/cbf
	$(BIN)/python fuzz/fuzz_ofrecord.py -max_total_time=$(FUZZ_SECONDS) .fuzz/ofrecord
	$(BIN)/python fuzz/fuzz_singa.py -max_total_time=$(FUZZ_SECONDS) .fuzz/singa tests/fuzz/corpus/singa

# AddressSanitizer run of the compiled kernels (tools/asan/README.md). Builds an instrumented
# copy of the tree under /tmp (the repo's .so files are untouched) and runs the fuzz and
# reader tests under libasan. Several minutes. ASAN_ARGS: pytest args instead of the default set.
asan: $(STAMP)
	PYTHON=$(abspath $(BIN)/python) tools/asan/run.sh $(ASAN_ARGS)

clean:
	rm -rf $(VENV) build site src/*.egg-info
	find src -name '*.so' -delete -o -name '*.cpp' -path '*recordkit*' -delete

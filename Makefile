# The two commands a fresh machine needs: `make demo` and `make test`.
# Both create .venv (if missing), install recordkit into it (building the compiled
# kernels) and then run.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install build bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py $(shell find src -name '*.pyx' -o -name '*.pxd' 2>/dev/null)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Rebuild the compiled kernels in place after editing a .pyx file.
build: $(STAMP)
	$(BIN)/python setup.py --quiet build_ext --inplace

demo: $(STAMP)
	$(BIN)/recordkit demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/ctf_throughput.py

clean:
	rm -rf $(VENV) build src/*.egg-info
	find src -name '*.so' -delete -o -name '*.cpp' -path '*recordkit*' -delete

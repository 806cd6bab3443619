# circuitdev — two commands on a fresh machine: `make book` (build the Jupyter Book) and `make test` (run the tests).
# Both create .venv when it is missing or older than pyproject.toml. torch is installed first, pinned to the CPU
# build (an unpinned torch pulls a multi-GB CUDA build); see environment.yml for conda.

PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
BIN := $(VENV)/bin
CORES ?= 2
# Extra snakemake arguments, e.g. SMK_ARGS="--config published_dir=/path/to/published"
SMK_ARGS ?=
# Where the authors' published per-head files are (optional; the book notes their absence).
PUBLISHED_DIR ?=

.PHONY: book test bench venv clean-book clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

test: $(STAMP)
	$(BIN)/python -m pytest

book: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile config/pipeline.yaml $(if $(PUBLISHED_DIR),--config published_dir=$(abspath $(PUBLISHED_DIR))) $(SMK_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/capture.py

clean-book:
	rm -rf _build book/_generated

clean: clean-book
	rm -rf $(VENV) .snakemake

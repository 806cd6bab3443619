# circuitdev — two commands on a fresh machine: `make book` (build the Jupyter Book) and `make test` (run the tests).
# Both create .venv when it is missing or older than pyproject.toml. torch is installed first, from PyTorch's CPU
# index when it answers within 3 s (the ~190 MB CPU build; PyPI's Linux torch is the CUDA build, ~2.7 GB with its
# NVIDIA libraries), else from the default index, saying so; TORCH_INDEX overrides: `make venv TORCH_INDEX=default`,
# `TORCH_INDEX=cu128` or any index URL (tools/torch_index.py decides). See environment.yml for conda.

PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
BIN := $(VENV)/bin
CORES ?= 2
# Extra snakemake arguments, e.g. SMK_ARGS="--config real_panels='[pythia-1b]'"
SMK_ARGS ?=
# A local copy of the authors' published files to fill data/published from (default: $CIRCUITDEV_PUBLISHED, else a
# download at the pinned commits; offline with neither, the book is built without them and says so).
PUBLISHED_DIR ?=
# The book's repository, for its repository and launch buttons (empty: none), e.g. https://github.com/OWNER/REPO
REPOSITORY_URL ?=
# The workshop's edition of the book: empty (or instructors) = its solutions folded under each exercise; participants =
# the solutions left out (`make book WORKSHOP_EDITION=participants`; the next plain `make book` puts them back).
WORKSHOP_EDITION ?=
BOOK_CONFIG = $(strip $(if $(PUBLISHED_DIR),published_from=$(abspath $(PUBLISHED_DIR))) $(if $(REPOSITORY_URL),repository_url=$(REPOSITORY_URL)) $(if $(WORKSHOP_EDITION),workshop_edition=$(WORKSHOP_EDITION)))
# torch's pin (the same as pyproject.toml's) and where it comes from: empty/auto = the CPU index when reachable, else
# the default index; `default`; an index URL; or a name on download.pytorch.org (cpu, cu126, cu128, rocm6.4).
TORCH_VERSION := 2.13.0
TORCH_INDEX ?=
# Expanded only when the venv recipe runs (never when .venv is up to date), so only a fresh install probes.
TORCH_PIP_ARGS = $(shell TORCH_INDEX='$(TORCH_INDEX)' $(PYTHON) tools/torch_index.py torch==$(TORCH_VERSION))

.PHONY: book pdf test bench venv lab clean-book clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(or $(TORCH_PIP_ARGS),$(error tools/torch_index.py gave no pip arguments (see above)))
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

test: $(STAMP)
	$(BIN)/python -m pytest

book: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile config/pipeline.yaml $(if $(BOOK_CONFIG),--config $(BOOK_CONFIG)) $(SMK_ARGS)

# The print edition: the paper part of the built book (intro, method, findings, audit, references) as one PDF,
# printed from the HTML pages by headless Chromium, offline (Debian: apt-get install -y chromium; README, "The PDF
# edition"). -> _build/pdf/circuitdev-book.pdf (and the page it printed, circuitdev-book.html)
pdf: book
	$(BIN)/python -m circuitdev.book.pdf _build/html -o _build/pdf/circuitdev-book.pdf

# The workshop: JupyterLab on notebooks/workshop, the .py sessions opening as notebooks (jupytext). Installs the
# `workshop` extra (JupyterLab + jupytext) first when it is missing; that needs the network once
# (book/workshop_instructor.md: setting up a room with none).
lab: $(STAMP)
	@$(BIN)/python -c "import jupyterlab, jupytext" 2>/dev/null || $(BIN)/pip install --quiet -e '.[workshop]'
	$(BIN)/circuitdev workshop lab

bench: $(STAMP)
	$(BIN)/python bench/capture.py
	$(BIN)/python bench/bootstrap.py

clean-book:
	rm -rf _build book/_generated

clean: clean-book
	rm -rf $(VENV) .snakemake

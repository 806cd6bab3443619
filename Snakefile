# The circuitdev pipeline: (toy panel) -> probe each (panel, revision) -> per-model notebooks -> per-finding
# notebooks -> book. Configuration: config/pipeline.yaml (override with --configfile FILE or --config KEY=VALUE).
#
# How targets are chosen
#   all (default)  every record of the probed panels, every notebook, and the book.
#                  Probed panels = the toy panels (`toy_families`, trained here by `circuitdev toy train`)
#                  + `real_panels` (opt-in; [] by default: the 30 real revisions need a GPU and ~200 GB of downloads)
#                  + `panels` (any other panel name or YAML file, e.g. a local-folder panel).
#                  Notebooks = model-<name> (the `model_notebook`) for each probed panel and, when a published
#                  dir is set, each of `published_models`; plus the per-finding `notebooks` list. A notebook whose
#                  source is missing is skipped with a warning while `skip_missing_notebooks` is true.
#                  The book is built when `book` is true, or `auto` and <book_root>/_toc.yml exists.
#   records        only the probe records;   notebooks   records + notebooks, no book;   toy   only the toy models.
#   Any file is a target too: snakemake data/results/pythia-1b/step3000.parquet
#
# Rules and what re-runs them (Snakemake's default rerun triggers: mtime, params, input, code)
#   published   makes <data_dir>/published complete (copy or download, sha256-checked), or says why not; pages
#               wait for it. Re-runs when the manifest changes or the files went missing.
#   toy         one job per toy panel (family x seed, one thread): trains (or reuses) its model and writes
#               data/panels/<panel>.yaml, so each panel's probe starts when its own training ends. Re-runs when
#               `toy_set` changes. `toy_seeds` > 0 adds independent replicas (panels toy-*-s<seed>): the pages show
#               their spread. The toy chain (toy, probe_toy, refine, ablate_toy, null_pr_toy) runs first (priority).
#   probe_toy   one job per toy panel (all its revisions in one process; the store keeps one record per revision).
#   probe_hub   one job per revision of a hub panel (GPU resources, see profiles/slurm); probe_local: the same for
#               folder and toy panels. Both run `circuitdev probe --revision R --probe-config JSON`; they re-run when
#               the probe configuration (panel defaults <- `probe` <- `probe_panel`) or the revision's entry in the
#               panel file changes, or when a folder panel's checkpoint file changes.
#   refine      `circuitdev refine --panel P --metric M --max-new K` for each entry of `refine:`, after the panel's
#               probe and before the notebooks (its records join the panel); runs once per entry (done-file).
#   ablate_toy  `circuitdev ablate --panel P --over-training` for each toy panel, after its probe and refinements:
#               <results>/<panel>/ablation_over_training.parquet, an input of the panel's notebooks.
#   null_pr_toy `circuitdev null-pr --panel P` for each toy panel, after its probe and refinements: each head's PR on
#               random tokens at every revision, <results>/<panel>/null_pr.parquet (the F5 page's PR null).
#   notebook    `circuitdev notebook run SOURCE --as NAME --out <generated_dir>` (jupytext -> papermill; one-way: the
#               .py source is never rewritten; the build's folders reach the page as environment variables).
#               Re-runs when its source, its parameters or the records it reads change.
#   workshop    `circuitdev workshop build SOURCE --edition book` for each session the toc lists under
#               <generated_dir>/workshop/ (config `workshop`). Re-runs when its source changes (and, when its solutions
#               run, the toy records).
#   book        jupyter-book build <book_root> -> <book_root>/_build/html. Re-runs when a notebook or page changes.
# Re-running after a finished build does nothing. Run with: .venv/bin/snakemake --cores 2 --configfile config/pipeline.yaml
# Where things are: the rules by concern in rules/{data,probe,pages}.smk; what they ask of the build (panels, each
# job's files and parameters, the cluster's settings) in circuitdev.book.pipeline.Pipeline. Time per rule of a build:
# bench/pipeline.py.

import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "lib"))  # the package, even when it is not installed

from circuitdev.book.config_schema import check_pipeline_config
from circuitdev.book.pipeline import NAME_RE, Pipeline, absolute, alternatives


configfile: str(Path(workflow.basedir) / "config" / "pipeline.yaml")
check_pipeline_config(config)  # before any job is planned


P = Pipeline(config, workflow.basedir)  # the configuration, resolved once (circuitdev.book.pipeline)
P.forget_stale_published_status()
P.published_from_environment()
for what, names in (("notebook(s) without a source yet", P.missing_notebooks),
                    ("workshop session(s) without a source", P.missing_sessions)):
    if names:
        print(f"Snakefile: skipping {what}: {', '.join(names)}", file=sys.stderr)

# the names the rules' shell commands use
PY = sys.executable  # the interpreter running Snakemake: same venv for every job (and on SLURM nodes)
BIN = str(Path(sys.executable).parent)
DATA, RESULTS, GEN, LOGS, BOOK_ROOT = P.data, P.results, P.generated, P.logs, P.book_root
PUBLISHED = P.published
TOY_PANELS = P.toy_panels
CPU_JOB, GPU_JOB = P.cluster_resources("cpu"), P.cluster_resources("gpu")


wildcard_constraints:
    panel=NAME_RE,
    revision=NAME_RE,
    name=NAME_RE,


localrules: all, records, notebooks, book


rule all:
    input:
        P.published_target(),
        P.all_records,
        P.notebook_outputs,
        [P.book_html] if P.book_enabled() else [],


rule records:
    input:
        P.all_records,


rule notebooks:
    input:
        P.published_target(),
        P.all_records,
        P.notebook_outputs,


include: "rules/data.smk"  # the authors' files, the toy models
include: "rules/probe.smk"  # probe records, refinements, the ablation and PR null over training
include: "rules/pages.smk"  # the pages, the workshop's sessions, the book

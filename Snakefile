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
#   toy         trains (or reuses) the toy models and writes data/panels/toy-*.yaml. Re-runs when `toy_set` changes.
#               `toy_seeds` > 0 adds independent replicas (panels toy-*-s<seed>): the pages show their spread.
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

import json
import os
import re
import shlex
import sys
from pathlib import Path


sys.path.insert(0, str(Path(workflow.basedir) / "lib"))  # the package, even when it is not installed

from circuitdev.book.build import (BuildFolders, book_config, config_panels, config_published_dir,
                                   config_published_from)
from circuitdev.book.pipeline import notebook_specs, workshop_sessions
from circuitdev.measure.config import ProbeConfig
from circuitdev.sources.panels import load_panel
from circuitdev.sources.store import FORMAT as RECORD_FORMAT  # a new record format re-runs the probe jobs (refresh)


configfile: os.path.join(workflow.basedir, "config", "pipeline.yaml")
__import__("circuitdev.book.config_schema").book.config_schema.check_pipeline_config(config)  # before any job is planned


PY = sys.executable  # the interpreter running Snakemake: same venv for every job (and on SLURM nodes)
BIN = str(Path(sys.executable).parent)
DATA = str(config.get("data_dir", "data"))
RESULTS = str(config.get("results_dir", "data/results"))
GEN = str(config.get("generated_dir", "book/_generated"))
LOGS = str(config.get("logs_dir", "logs"))
BOOK_ROOT = str(config.get("book_root", "."))
NAME_RE = "[A-Za-z0-9][A-Za-z0-9._-]*"


def absolute(path):
    return None if path in (None, "", "none", "null") else str(Path(path).resolve())


PUBLISHED = config_published_dir(config)  # the folder the pages read: <data_dir>/published (None: left out)
PUBLISHED_FROM = config_published_from(config)  # a local copy to fill it from, else a download (None)
PUBLISHED_STATUS = f"{DATA}/published.status.json"  # what the `published` rule found (complete or why not)
MANIFEST = os.path.join(workflow.basedir, "data", "published_manifest.tsv")


def published_dir():
    """The authors' files of this build (the `published` rule makes the folder complete, or it stays absent)."""
    return str(PUBLISHED) if PUBLISHED is not None else None


def _files_complete():
    """Every manifest file is there with its size (the rule itself checks the sha256s)."""
    try:
        rows = [l.split("\t") for l in Path(MANIFEST).read_text().splitlines() if l.strip() and not l.startswith("#")]
        return all((PUBLISHED / r[0]).is_file() and (PUBLISHED / r[0]).stat().st_size == int(r[3]) for r in rows[1:])
    except (OSError, ValueError, IndexError):
        return False


def _status_says_complete():
    try:
        return bool(json.loads(Path(PUBLISHED_STATUS).read_text()).get("complete"))
    except (OSError, ValueError):
        return None


# The status is the rule's output: when it no longer says what is on disk (files removed, or fetched by hand since),
# it goes, so the rule runs again and the pages that read the files follow. An offline build keeps its "not
# available" status: later builds do not retry (`circuitdev published fetch` does, or removing the status file).
if PUBLISHED is not None and _status_says_complete() not in (None, _files_complete()):
    Path(PUBLISHED_STATUS).unlink()


# --- panels --------------------------------------------------------------------------------------------------------
CONFIG_PANELS = config_panels(config)  # name -> panel file (None: a toy panel, written by the toy training)
TOY_PANELS = [n for n, f in CONFIG_PANELS.items() if f is None]
PANEL_FILES = {n: f for n, f in CONFIG_PANELS.items() if f is not None}  # hub and folder panels known at parse time
HUB_PANELS = [n for n, f in PANEL_FILES.items() if not load_panel(f, resolve_hub=False).is_local]
ALL_PANELS = [*TOY_PANELS, *PANEL_FILES]


def alternatives(names):
    """A wildcard constraint matching exactly these names (or nothing)."""
    return "(?:" + "|".join(re.escape(n) for n in names) + ")" if names else "(?!x)x"


def panel_file(name):
    if name in PANEL_FILES:
        return PANEL_FILES[name]
    return str(Path(DATA) / "panels" / f"{name}.yaml")  # toy panels: written by the toy checkpoint


def panel(name):
    return load_panel(panel_file(name))


def revisions(name):
    """Revision names of a panel."""
    return [r.name for r in panel(name).revisions]


def records(name):
    """What a panel's probe jobs leave behind: one record per revision, or for a toy panel the panel's done-file."""
    if name in TOY_PANELS:
        return [toy_done(name)]
    return [f"{RESULTS}/{name}/{rev}.parquet" for rev in revisions(name)]


def toy_done(name):
    return f"{RESULTS}/{name}/panel.done"


REFINE = [dict(r) for r in config.get("refine") or []]  # {panel, metric, max_new}: `circuitdev refine` runs


def refine_done(entry):
    return f"{RESULTS}/{entry['panel']}/refine-{entry['metric']}-{int(entry.get('max_new', 4))}.done"


def refines(name):
    """The done-files of the refinements of a panel (its records are complete only after them)."""
    return [refine_done(r) for r in REFINE if r["panel"] == name]


def refine_before(wildcards):
    """The refinements of the same panel listed before this one: they run one after the other (each adds to the
    panel's refined list)."""
    mine = [refine_done(r) for r in REFINE if r["panel"] == wildcards.panel]
    this = f"{RESULTS}/{wildcards.panel}/refine-{wildcards.metric}-{wildcards.k}.done"
    return mine[:mine.index(this)] if this in mine else []


def ablations(name):
    """The ablation-over-training table of a toy panel (rule ablate_toy); other panels have none."""
    return [f"{RESULTS}/{name}/ablation_over_training.parquet"] if name in TOY_PANELS else []


def null_prs(name):
    """The PR null over training of a toy panel (rule null_pr_toy); other panels have none."""
    return [f"{RESULTS}/{name}/null_pr.parquet"] if name in TOY_PANELS else []


def all_records(wildcards=None):
    return [f for name in ALL_PANELS for f in [*records(name), *refines(name)]]


def probe_fields(name):
    fields = dict(config.get("probe") or {})
    fields.update((config.get("probe_panel") or {}).get(name) or {})
    if config.get("device") not in (None, "auto"):
        fields["device"] = config["device"]
    return fields


def probe_params(wildcards):
    """What a probe job's result depends on (besides code): its configuration and its revision's panel entry."""
    p = panel(wildcards.panel)
    rev = p.revision(wildcards.revision)
    cfg = p.probe_config(**probe_fields(wildcards.panel))
    return json.dumps({"config_hash": cfg.config_hash(), "model": p.model, "family": p.family,
                       "revision": [rev.name, rev.tokens, rev.step], "source": p.source, "format": RECORD_FORMAT},
                      sort_keys=True)


def probe_inputs(wildcards):
    name = wildcards.panel
    if name in TOY_PANELS:
        return [f"{DATA}/toy/{name}/recipe.json"]
    p = panel(name)
    if not p.is_local:
        return []
    folder = p.revision_path(wildcards.revision)
    index = folder / "model.safetensors.index.json"
    return [str(index if index.is_file() else folder / "model.safetensors")]


# --- notebooks -----------------------------------------------------------------------------------------------------
PUBLISHED_MODELS = list(config.get("published_models") or []) if published_dir() else []


NOTEBOOKS, _missing = notebook_specs(config, panels=ALL_PANELS, panel_files=PANEL_FILES,
                                     published_models=PUBLISHED_MODELS, data_dir=DATA)
if _missing:
    print(f"Snakefile: skipping notebook(s) without a source yet: {', '.join(_missing)}", file=sys.stderr)


def notebook_environment(name):
    """The build's folders for one page, as the environment its kernel starts with (`circuitdev.book.build`)."""
    folders = BuildFolders(results_dir=Path(RESULTS).resolve(), data_dir=Path(DATA).resolve(),
                           published_dir=Path(published_dir()) if published_dir() else None,
                           panels=list(NOTEBOOKS[name]["panels"]))
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(folders.environment().items()))


def notebook_inputs(wildcards):
    spec = NOTEBOOKS[wildcards.name]
    return {"source": spec["source"],
            "records": [f for name in spec["panels"]
                        for f in [*records(name), *refines(name), *ablations(name), *null_prs(name)]],
            "published": [PUBLISHED_STATUS] if PUBLISHED is not None else []}


def notebook_outputs(wildcards=None):
    """The executed pages the book renders: the notebooks above and the workshop's sessions (below)."""
    return [f"{GEN}/{name}.ipynb" for name in NOTEBOOKS] + [f"{GEN}/workshop/{s}.ipynb" for s in WORKSHOP_SESSIONS]


# --- the Workshop part: notebooks/workshop/NN_*.py -> <generated_dir>/workshop/NN_*.ipynb (the book's edition) -------
WORKSHOP = config.get("workshop") or {}  # {sources: DIR, execute: auto | true | false} (config/pipeline.yaml)


WORKSHOP_SOURCES, _missing = workshop_sessions(
    book_root=BOOK_ROOT, generated_dir=GEN,
    sources=WORKSHOP.get("sources") or Path(workflow.basedir) / "notebooks" / "workshop")
if _missing:
    print(f"Snakefile: workshop session(s) without a source: {', '.join(_missing)}", file=sys.stderr)
WORKSHOP_SESSIONS = list(WORKSHOP_SOURCES)
# auto: run the solutions when this build trains the toy panel they run on (toy-pythia); else render them unexecuted
WORKSHOP_EXECUTE = "toy-pythia" in TOY_PANELS if WORKSHOP.get("execute", "auto") == "auto" else bool(WORKSHOP["execute"])


def workshop_inputs(wildcards):
    """A session's source; when its solutions run, the toy panels' records and the authors' files it reads."""
    run = WORKSHOP_EXECUTE
    return {"source": WORKSHOP_SOURCES[wildcards.session],
            # the sessions' checks, data lookup and pictures: a change there shows on the executed pages
            "code": sorted(str(p) for p in (Path(workflow.basedir) / "lib" / "circuitdev" / "workshop").rglob("*.py")),
            # the records after the refinements: the sessions read the panel with its refined revisions, as the
            # chapters do (load_panel(name, results_dir=...)), not the grid a refinement has not yet joined
            "records": [f for name in TOY_PANELS for f in [*records(name), *refines(name)]] if run else [],
            "published": [PUBLISHED_STATUS] if run and PUBLISHED is not None else []}


def workshop_environment():
    folders = BuildFolders(results_dir=Path(RESULTS).resolve(), data_dir=Path(DATA).resolve(),
                           published_dir=Path(published_dir()) if published_dir() else None, panels=None)
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(folders.environment().items()))


def book_enabled():
    value = config.get("book", "auto")
    if value == "auto":
        return (Path(BOOK_ROOT) / "_toc.yml").is_file()
    return bool(value)


def book_inputs(wildcards=None):
    root = Path(BOOK_ROOT)
    pages = sorted(str(p) for ext in ("*.md", "*.bib") for p in (root / "book").glob(ext))
    extra = [os.path.normpath(root / f) for f in ("_config.yml", "_toc.yml")]
    return [*notebook_outputs(), *pages, *extra]


BOOK_HTML = os.path.normpath(os.path.join(BOOK_ROOT, "_build", "html", "index.html"))


# --- what each job asks a SLURM cluster for: config `cluster:` (profiles/slurm; a local run ignores it but `gpu`) ----
CLUSTER_NUMBERS = ("mem_mb", "runtime", "max_cpus", "gpu", "gpu_cpus", "gpu_mem_mb", "gpu_runtime")
CLUSTER_KEYS = ("account", "partition", "gpu_partition", "gpu_model", "gres", *CLUSTER_NUMBERS)


def cluster_setting(key):
    """One `cluster:` setting, None when unset; --config passes every value as a string ("2000", "null")."""
    value = (config.get("cluster") or {}).get(key)
    if value is None or str(value).strip().lower() in ("", "null", "none", "~"):
        return None
    if key in CLUSTER_NUMBERS:
        if not str(value).strip().isdigit():
            raise ValueError(f"config cluster: {key}={value!r} must be a whole number >= 0 (config/pipeline.yaml)")
        return int(value)
    return str(value)


_unknown = sorted(set(config.get("cluster") or {}) - set(CLUSTER_KEYS))
if _unknown:
    raise ValueError(f"config cluster: unknown setting(s) {', '.join(_unknown)}; known: {', '.join(CLUSTER_KEYS)}")


def cluster_resources(kind="cpu"):
    """A CPU job's or a hub probe's ("gpu") resources for the SLURM executor from config `cluster:` (the plugin's
    names: slurm_partition -> -p, mem_mb -> --mem, runtime -> -t, gpu/gpu_model -> --gpus, gres -> --gres,
    slurm_account -> -A). A null (or 0) setting is not asked for: the cluster's default applies."""
    c = cluster_setting
    if kind == "gpu":
        wanted = {"gpu": c("gpu"), "gpu_model": c("gpu_model"), "gres": c("gres"),
                  "slurm_partition": c("gpu_partition") or c("partition"), "mem_mb": c("gpu_mem_mb"),
                  "runtime": c("gpu_runtime")}
    else:
        wanted = {"slurm_partition": c("partition"), "mem_mb": c("mem_mb"), "runtime": c("runtime")}
    wanted["slurm_account"] = c("account")
    return {k: v for k, v in wanted.items() if v not in (None, 0)}


def cluster_threads(n):
    """A job's threads (= the CPUs it asks a cluster for), at most `cluster: max_cpus`."""
    cap = cluster_setting("max_cpus")
    return max(1, min(int(n), cap)) if cap else int(n)


CPU_JOB, GPU_JOB = cluster_resources("cpu"), cluster_resources("gpu")


# --- rules ---------------------------------------------------------------------------------------------------------
wildcard_constraints:
    panel=NAME_RE,
    revision=NAME_RE,
    name=NAME_RE,


localrules: all, records, notebooks, book


PUBLISHED_TARGET = [PUBLISHED_STATUS] if PUBLISHED is not None else []


rule all:
    input:
        PUBLISHED_TARGET,
        all_records,
        notebook_outputs,
        [BOOK_HTML] if book_enabled() else [],


rule records:
    input:
        all_records,


rule notebooks:
    input:
        PUBLISHED_TARGET,
        all_records,
        notebook_outputs,


if PUBLISHED is not None:

    rule published:
        """Make <data_dir>/published hold every file of the manifest (sha256-checked), copied from a local copy
        (`published_from`, $CIRCUITDEV_PUBLISHED, `make book PUBLISHED_DIR=...`) or downloaded at the pinned
        commits; offline with no copy it prints one line and the pages note the missing tier. Never fails."""
        input:
            MANIFEST,
        output:
            PUBLISHED_STATUS,
        params:
            source=f"--from {shlex.quote(str(PUBLISHED_FROM))}" if PUBLISHED_FROM else "",
        resources: **CPU_JOB
        shell:
            "{PY:q} -m circuitdev.cli published ensure --to {PUBLISHED:q} {params.source} --status {output:q}"


if TOY_PANELS:

    rule toy:
        """Train (or reuse) the toy models; writes <data_dir>/toy/<panel>/ and <data_dir>/panels/<panel>.yaml."""
        output:
            [f"{DATA}/toy/{name}/recipe.json" for name in TOY_PANELS],
        params:
            families=" ".join(f"--family {f}" for f in config.get("toy_families") or []),
            seeds="--seeds " + " ".join(str(int(s)) for s in config.get("toy_seeds") or [0]),
            sets=" ".join(shlex.quote(f"--set={k}={json.dumps(v)}") for k, v in sorted((config.get("toy_set") or {}).items())),
        threads: cluster_threads(min(3, len(TOY_PANELS)))
        resources: **CPU_JOB
        log:
            f"{LOGS}/toy.log",
        shell:
            "{PY:q} -m circuitdev.cli toy train {params.families} {params.seeds} {params.sets} --data-dir {DATA:q} --jobs {threads} "
            "--no-progress > {log:q} 2>&1"


PROBE_SHELL = (
    "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli probe --panel {params.panel_file:q} --revision {wildcards.revision} "
    "--out {RESULTS:q} --probe-config {params.probe_config:q} --no-progress > {log:q} 2>&1"
)


rule probe_toy:
    """Every revision of a toy panel in one process: a toy revision probes in seconds, while each process spends
    5-8 s importing torch, transformers and nnsight. The store still writes and resumes one record per revision."""
    input:
        lambda wc: f"{DATA}/toy/{wc.panel}/recipe.json",
    output:
        toy_done("{panel}"),
    wildcard_constraints:
        panel=alternatives(TOY_PANELS),
    params:
        panel_file=lambda wc: panel_file(wc.panel),
        probe_config=lambda wc: json.dumps(probe_fields(wc.panel), sort_keys=True),
        # + the panel's own defaults via recipe.json, + the library's defaults (a new ProbeConfig field re-probes)
        depends=lambda wc: json.dumps({**probe_fields(wc.panel), "defaults": ProbeConfig().config_hash(),
                                       "format": RECORD_FORMAT}, sort_keys=True),
    threads: 1
    resources: **CPU_JOB
    log:
        f"{LOGS}/probe/{{panel}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli probe --panel {params.panel_file:q} "
        "--out {RESULTS:q} --probe-config {params.probe_config:q} --no-progress > {log:q} 2>&1 && touch {output:q}"


rule probe_hub:
    """One revision of a hub panel: a 1B model, GPU advised (resources: gpu=1 for SLURM / --resources gpu=1)."""
    input:
        probe_inputs,
    output:
        parquet=f"{RESULTS}/{{panel}}/{{revision}}.parquet",
        sidecar=f"{RESULTS}/{{panel}}/{{revision}}.json",
    wildcard_constraints:
        panel=alternatives(HUB_PANELS),
    params:
        panel_file=lambda wc: panel_file(wc.panel),
        probe_config=lambda wc: json.dumps(probe_fields(wc.panel), sort_keys=True),
        depends=probe_params,
    resources: **GPU_JOB
    threads: cluster_threads(cluster_setting("gpu_cpus") or 4)
    log:
        f"{LOGS}/probe/{{panel}}/{{revision}}.log",
    shell:
        PROBE_SHELL


rule probe_local:
    """One revision of a toy or local-folder panel (small models: CPU is fine)."""
    input:
        probe_inputs,
    output:
        parquet=f"{RESULTS}/{{panel}}/{{revision}}.parquet",
        sidecar=f"{RESULTS}/{{panel}}/{{revision}}.json",
    wildcard_constraints:
        panel=alternatives([n for n in ALL_PANELS if n not in HUB_PANELS and n not in TOY_PANELS]),
    params:
        panel_file=lambda wc: panel_file(wc.panel),
        probe_config=lambda wc: json.dumps(probe_fields(wc.panel), sort_keys=True),
        depends=probe_params,
    threads: 1
    resources: **CPU_JOB
    log:
        f"{LOGS}/probe/{{panel}}/{{revision}}.log",
    shell:
        PROBE_SHELL


rule refine:
    """Refine a probed panel's revision grid where a per-revision metric changes most (`circuitdev refine`). Its
    input is marked ancient: re-probing the panel (a new probe setting) re-probes the refined revisions too, and
    does not refine again; delete the done-file to refine further."""
    input:
        lambda wc: [ancient(f) for f in records(wc.panel)] + refine_before(wc),
    output:
        f"{RESULTS}/{{panel}}/refine-{{metric}}-{{k}}.done",
    wildcard_constraints:
        panel=alternatives(sorted({r["panel"] for r in REFINE})),
        metric="[A-Za-z0-9_]+",
        k="[0-9]+",
    params:
        panel_file=lambda wc: panel_file(wc.panel),
    threads: 1
    resources: **CPU_JOB
    log:
        f"{LOGS}/refine/{{panel}}-{{metric}}-{{k}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli refine --panel {params.panel_file:q} "
        "--metric {wildcards.metric} --max-new {wildcards.k} --out {RESULTS:q} > {log:q} 2>&1 && touch {output:q}"


rule ablate_toy:
    """The final induction circuit zero-ablated at every revision of a toy panel (`circuitdev ablate --over-training`),
    after its probe and refinements, before the notebooks; resumable, and it recomputes only rows whose record
    changed."""
    input:
        lambda wc: [toy_done(wc.panel), *refines(wc.panel)],
    output:
        f"{RESULTS}/{{panel}}/ablation_over_training.parquet",
    wildcard_constraints:
        panel=alternatives(TOY_PANELS),
    params:
        panel_file=lambda wc: panel_file(wc.panel),
    threads: 1
    log:
        f"{LOGS}/ablate/{{panel}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli ablate "
        "--panel {params.panel_file:q} --over-training --out {RESULTS:q} --no-progress > {log:q} 2>&1"


rule null_pr_toy:
    """Each head's PR on random tokens at every revision of a toy panel (`circuitdev null-pr`), after its probe and
    refinements, before the notebooks; resumable, and it recomputes only revisions whose record changed."""
    input:
        lambda wc: [toy_done(wc.panel), *refines(wc.panel)],
    output:
        f"{RESULTS}/{{panel}}/null_pr.parquet",
    wildcard_constraints:
        panel=alternatives(TOY_PANELS),
    params:
        panel_file=lambda wc: panel_file(wc.panel),
    threads: 1
    log:
        f"{LOGS}/null_pr/{{panel}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli null-pr "
        "--panel {params.panel_file:q} --out {RESULTS:q} --no-progress > {log:q} 2>&1"


rule notebook:
    input:
        unpack(notebook_inputs),
    output:
        f"{GEN}/{{name}}.ipynb",
    params:
        parameters=lambda wc: json.dumps(NOTEBOOKS[wc.name]["parameters"], sort_keys=True),
        environment=lambda wc: notebook_environment(wc.name),
        cwd=absolute(BOOK_ROOT),
        kernel=config.get("kernel", "python3"),
    resources: **CPU_JOB
    log:
        f"{LOGS}/notebooks/{{name}}.log",
    shell:
        # the page's own parameters as papermill parameters, the build's folders as its environment
        "{params.environment} {PY:q} -m circuitdev.cli notebook run {input.source:q} --as {wildcards.name} "
        "--out {GEN:q} --parameters {params.parameters:q} --cwd {params.cwd:q} --kernel {params.kernel} > {log:q} 2>&1"


rule workshop:
    """One session of the Workshop part: `circuitdev workshop build SOURCE --edition book` -> <generated_dir>/workshop/
    (exercise and folded solution blocks; the solutions executed per `workshop: execute`). Sessions 2 and 4
    share the participant's `mini` run: a lock next to its checkpoints serialises them."""
    input:
        unpack(workshop_inputs),
    output:
        f"{GEN}/workshop/{{session}}.ipynb",
    wildcard_constraints:
        session=alternatives(WORKSHOP_SESSIONS),
    params:
        environment=workshop_environment(),
        execute="" if WORKSHOP_EXECUTE else "--no-execute",
        out=f"{GEN}/workshop",
    resources: **CPU_JOB
    log:
        f"{LOGS}/workshop/{{session}}.log",
    shell:
        "{params.environment} {PY:q} -m circuitdev.cli workshop build {input.source:q} --edition book "
        "--out {params.out:q} {params.execute} > {log:q} 2>&1"


rule book:
    input:
        book_inputs,
    output:
        BOOK_HTML,
    params:
        # `repository_url` (empty by default): the repository and launch buttons; `workshop_edition` (instructors by
        # default; participants: the workshop's solutions left out, `make book WORKSHOP_EDITION=participants`): a
        # generated copy of _config.yml (circuitdev.book.build.book_config)
        config=lambda wc: book_config(config.get("repository_url") or None,
                                      workshop_edition=str(config.get("workshop_edition") or "instructors"),
                                      source=Path(BOOK_ROOT) / "_config.yml",
                                      out=Path(BOOK_ROOT) / "_build" / "_config.generated.yml"),
        repository=config.get("repository_url") or "",
        workshop_edition=str(config.get("workshop_edition") or "instructors"),  # another edition re-runs the build
    log:
        f"{LOGS}/book.log",
    shell:
        # --all: the intro quotes numbers glued on other pages, so an incremental build could leave them stale;
        # -W: Sphinx warnings are errors.
        "{BIN}/jupyter-book build {BOOK_ROOT:q} --config {params.config:q} --all -W --keep-going > {log:q} 2>&1"

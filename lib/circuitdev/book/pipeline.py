"""What the pipeline builds, from its configuration: the pages (notebooks) and the workshop's sessions.

The Snakefile asks these two questions and nothing else of the configuration's page lists:

    specs, missing = notebook_specs(config, panels=ALL_PANELS, panel_files=PANEL_FILES, published_models=[...])
    sessions, missing = workshop_sessions(toc, generated_dir=GEN, book_root=BOOK_ROOT, sources=FOLDER)

A page spec is {"source": notebooks/<page>.py, "parameters": {...}, "panels": [record panels it reads]}: one model
page `model-<panel>` per probed panel and per published model, then the per-finding pages of `notebooks:`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Sequence

from circuitdev.errors import ConfigError

Spec = dict[str, Any]


def page_panel(name: str, panel_files: dict[str, str], data_dir: str | os.PathLike) -> str:
    """How a model page names its panel: by name when the data folder holds its file (or it is a toy or published
    panel), else by the file's path relative to the working directory."""
    file = panel_files.get(name)
    if file is None or Path(file).resolve() == (Path(data_dir) / "panels" / f"{name}.yaml").resolve():
        return name
    return os.path.relpath(file)


def notebook_specs(config: dict[str, Any], *, panels: Sequence[str], panel_files: dict[str, str],
                   published_models: Sequence[str], data_dir: str | os.PathLike = "data"
                   ) -> tuple[dict[str, Spec], list[str]]:
    """The pages of a build, by output name, and the names left out because their source does not exist (when
    `skip_missing_notebooks` is true; else a missing source is an error)."""
    specs: dict[str, Spec] = {}
    model = config.get("model_notebook") or {}
    if model.get("source"):
        for name in [*panels, *[m for m in published_models if m not in panels]]:
            specs[f"model-{name}"] = {"source": model["source"],
                                      "parameters": {**(model.get("parameters") or {}),
                                                     "panel": page_panel(name, panel_files, data_dir)},
                                      "panels": [name] if name in panels else []}
    for nb in config.get("notebooks") or []:
        if nb["name"] in specs:
            raise ConfigError(f"notebook name {nb['name']!r} is used twice")
        specs[nb["name"]] = {"source": nb["source"], "parameters": dict(nb.get("parameters") or {}),
                             "panels": list(nb.get("panels", panels))}
    missing = [n for n, s in specs.items() if not Path(s["source"]).is_file()]
    if missing and not config.get("skip_missing_notebooks", True):
        raise ConfigError(f"notebook source(s) missing: {', '.join(specs[n]['source'] for n in missing)}")
    return {n: s for n, s in specs.items() if n not in missing}, missing


def _toc_files(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        yield from ([node["file"]] if isinstance(node.get("file"), str) else [])
        for value in node.values():
            yield from _toc_files(value)
    elif isinstance(node, list):
        for value in node:
            yield from _toc_files(value)


def workshop_sessions(*, book_root: str | os.PathLike, generated_dir: str | os.PathLike,
                      sources: str | os.PathLike) -> tuple[dict[str, str], list[str]]:
    """Session name -> source (`sources`/<name>.py) for the pages <book_root>/_toc.yml lists under
    <generated_dir>/workshop/ (the table of contents decides which exist), and the listed names without a source."""
    import yaml

    toc = Path(book_root) / "_toc.yml"
    if not toc.is_file():
        return {}, []
    prefix = os.path.relpath(Path(generated_dir) / "workshop", book_root).replace(os.sep, "/") + "/"
    names = [f[len(prefix):] for f in _toc_files(yaml.safe_load(toc.read_text())) if f.startswith(prefix)]
    folder = Path(sources)
    missing = [n for n in names if not (folder / f"{n}.py").is_file()]
    return {n: str(folder / f"{n}.py") for n in names if n not in missing}, missing


# ------------------------------------------------------------------------------------------ the workflow's inputs
# What the Snakefile's rules ask of a build: its folders, its panels, each job's inputs and parameters, what a cluster
# gives each job. The Snakefile builds one `Pipeline` from its configuration and keeps only the rules.

CLUSTER_NUMBERS = ("mem_mb", "runtime", "max_cpus", "gpu", "gpu_cpus", "gpu_mem_mb", "gpu_runtime")
CLUSTER_KEYS = ("account", "partition", "gpu_partition", "gpu_model", "gres", *CLUSTER_NUMBERS)
NAME_RE = "[A-Za-z0-9][A-Za-z0-9._-]*"
PUBLISHED_FROM_ENV = "CIRCUITDEV_PUBLISHED_FROM"  # the `published` rule's source copy (published_from_environment)


def alternatives(names: Sequence[str]) -> str:
    """A wildcard constraint matching exactly these names (or nothing)."""
    import re

    return "(?:" + "|".join(re.escape(n) for n in names) + ")" if names else "(?!x)x"


def absolute(path: Any) -> str | None:
    return None if path in (None, "", "none", "null") else str(Path(path).resolve())


class Pipeline:
    """One build's configuration, resolved once: folders, panels, pages, sessions and the cluster's settings.

    `config` is Snakemake's (config/pipeline.yaml merged with --configfile / --config); `basedir` the repository (the
    Snakefile's folder); paths in `config` are relative to the working directory, as Snakemake's are."""

    def __init__(self, config: dict[str, Any], basedir: str | os.PathLike):
        from circuitdev.book.build import config_panels, config_published_dir, config_published_from
        from circuitdev.sources.panels import load_panel

        self.config, self.basedir = config, Path(basedir)
        self.data = str(config.get("data_dir", "data"))
        self.results = str(config.get("results_dir", "data/results"))
        self.generated = str(config.get("generated_dir", "book/_generated"))
        self.logs = str(config.get("logs_dir", "logs"))
        self.book_root = str(config.get("book_root", "."))
        self.published = config_published_dir(config)  # the folder the pages read (None: left out)
        self.published_from = config_published_from(config)  # a local copy to fill it from, else a download
        self.published_status = f"{self.data}/published.status.json"  # what the `published` rule found
        self.manifest = str(self.basedir / "data" / "published_manifest.tsv")
        self._check_cluster_keys()
        panels = config_panels(config)  # name -> panel file (None: a toy panel, written by the toy training)
        self.toy_panels = [n for n, f in panels.items() if f is None]
        self.panel_files = {n: f for n, f in panels.items() if f is not None}  # hub and folder panels, known now
        self.hub_panels = [n for n, f in self.panel_files.items() if not load_panel(f, resolve_hub=False).is_local]
        self.all_panels = [*self.toy_panels, *self.panel_files]
        self.local_panels = [n for n in self.all_panels if n not in self.hub_panels and n not in self.toy_panels]
        self.refine = [dict(r) for r in config.get("refine") or []]  # {panel, metric, max_new}
        self.published_models = list(config.get("published_models") or []) if self.published is not None else []
        self.notebooks, self.missing_notebooks = notebook_specs(
            config, panels=self.all_panels, panel_files=self.panel_files, published_models=self.published_models,
            data_dir=self.data)
        self.workshop = config.get("workshop") or {}  # {sources: DIR, execute: auto | true | false}
        self.workshop_sources, self.missing_sessions = workshop_sessions(
            book_root=self.book_root, generated_dir=self.generated,
            sources=self.workshop.get("sources") or self.basedir / "notebooks" / "workshop")
        self.workshop_sessions = list(self.workshop_sources)
        # auto: run the solutions when this build trains the toy panel they run on (toy-pythia); else unexecuted
        execute = self.workshop.get("execute", "auto")
        self.workshop_execute = "toy-pythia" in self.toy_panels if execute == "auto" else bool(execute)
        self.book_html = os.path.normpath(os.path.join(self.book_root, "_build", "html", "index.html"))

    # --- the authors' files ------------------------------------------------------------------------------------
    def published_dir(self) -> str | None:
        """The authors' files of this build (the `published` rule makes the folder complete, or it stays absent)."""
        return str(self.published) if self.published is not None else None

    def published_target(self) -> list[str]:
        return [self.published_status] if self.published is not None else []

    def _files_complete(self, folder: str | os.PathLike | None = None) -> bool:
        """Every manifest file is in `folder` (default: the published folder) with its size (the rule itself
        checks the sha256s)."""
        folder = Path(self.published if folder is None else folder)
        try:
            rows = [line.split("\t") for line in Path(self.manifest).read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
            return all((folder / r[0]).is_file() and (folder / r[0]).stat().st_size == int(r[3]) for r in rows[1:])
        except (OSError, ValueError, IndexError):
            return False

    def published_from_environment(self) -> None:
        """$CIRCUITDEV_PUBLISHED_FROM for the `published` rule's shell: the copy to fill the folder from ("" to
        download). Not a parameter of the rule, which would make it a re-run trigger: the same files given another
        way (`make pdf` after `make book PUBLISHED_DIR=...`) would re-run every page. Set where the Snakefile is
        read, so every job (local, or on a SLURM node) sees its build's."""
        os.environ[PUBLISHED_FROM_ENV] = str(self.published_from or "")

    def _status_says_complete(self) -> bool | None:
        import json

        try:
            return bool(json.loads(Path(self.published_status).read_text()).get("complete"))
        except (OSError, ValueError):
            return None

    def forget_stale_published_status(self) -> None:
        """The status is the `published` rule's output: when it no longer says what is on disk (files removed, or
        fetched by hand since), or says "not available" while this build names a complete copy to fill the folder
        from (`published_from`), it goes, so the rule runs again and the pages that read the files follow. An
        offline build with no copy keeps its "not available" status: later builds do not retry (`circuitdev
        published fetch` does). Where the files come from is no trigger of its own (`published_from_environment`)."""
        if self.published is None:
            return
        said = self._status_says_complete()
        copy_now = said is False and self.published_from is not None and self._files_complete(self.published_from)
        if said not in (None, self._files_complete()) or copy_now:
            Path(self.published_status).unlink()

    # --- panels and their records ------------------------------------------------------------------------------
    def toy_run(self, name: str) -> tuple[str, int]:
        """(family, seed) of a toy panel of this build: what its own `toy` job trains."""
        from circuitdev.schema import replica_suffix
        from circuitdev.toy.recipe import PANEL_NAMES

        runs = {PANEL_NAMES[f] + replica_suffix(int(s)): (f, int(s))
                for s in self.config.get("toy_seeds") or [0] for f in self.config.get("toy_families") or []}
        return runs[name]

    def toy_train_args(self, name: str) -> str:
        """`circuitdev toy train` arguments for one toy panel: its family, its seed, the build's `toy_set`."""
        import json
        import shlex

        family, seed = self.toy_run(name)
        sets = [shlex.quote(f"--set={k}={json.dumps(v)}")
                for k, v in sorted((self.config.get("toy_set") or {}).items())]
        return " ".join([f"--family {family}", f"--seeds {seed}", *sets])

    def panel_file(self, name: str) -> str:
        if name in self.panel_files:
            return self.panel_files[name]
        return str(Path(self.data) / "panels" / f"{name}.yaml")  # toy panels: written by the toy training

    def panel(self, name: str):
        from circuitdev.sources.panels import load_panel

        return load_panel(self.panel_file(name))

    def toy_done(self, name: str) -> str:
        return f"{self.results}/{name}/panel.done"

    def records(self, name: str) -> list[str]:
        """What a panel's probe jobs leave behind: one record per revision, or for a toy panel its done-file."""
        if name in self.toy_panels:
            return [self.toy_done(name)]
        return [f"{self.results}/{name}/{rev.name}.parquet" for rev in self.panel(name).revisions]

    def refine_done(self, entry: dict) -> str:
        return f"{self.results}/{entry['panel']}/refine-{entry['metric']}-{int(entry.get('max_new', 4))}.done"

    def refines(self, name: str) -> list[str]:
        """The done-files of the refinements of a panel (its records are complete only after them)."""
        return [self.refine_done(r) for r in self.refine if r["panel"] == name]

    def refine_panels(self) -> list[str]:
        return sorted({r["panel"] for r in self.refine})

    def refine_before(self, wildcards) -> list[str]:
        """The refinements of the same panel listed before this one: they run one after the other (each adds to the
        panel's refined list)."""
        mine = self.refines(wildcards.panel)
        this = f"{self.results}/{wildcards.panel}/refine-{wildcards.metric}-{wildcards.k}.done"
        return mine[:mine.index(this)] if this in mine else []

    def ablations(self, name: str) -> list[str]:
        """The ablation-over-training table of a toy panel (rule ablate_toy); other panels have none."""
        return [f"{self.results}/{name}/ablation_over_training.parquet"] if name in self.toy_panels else []

    def null_prs(self, name: str) -> list[str]:
        """The PR null over training of a toy panel (rule null_pr_toy); other panels have none."""
        return [f"{self.results}/{name}/null_pr.parquet"] if name in self.toy_panels else []

    def all_records(self, wildcards=None) -> list[str]:
        return [f for name in self.all_panels for f in [*self.records(name), *self.refines(name)]]

    def probed(self, name: str) -> list[str]:
        """A toy panel's records after its refinements: what its ablation and PR-null jobs start from."""
        return [self.toy_done(name), *self.refines(name)]

    # --- probing -----------------------------------------------------------------------------------------------
    @property
    def null_pr_draws(self) -> int:
        """The PR null's random batches per toy revision (config `null_pr_draws`; rule null_pr_toy's --draws)."""
        from circuitdev.sources.null_pr import DEFAULT_DRAWS

        return int(self.config.get("null_pr_draws", DEFAULT_DRAWS))

    @property
    def null_job_draws(self) -> int:
        """Rule null_pr_toy's --draws: the probes' (which it then reads), else the null job's own default."""
        from circuitdev.sources.null_pr import DEFAULT_DRAWS

        return self.null_pr_draws or DEFAULT_DRAWS

    def probe_fields(self, name: str) -> dict[str, Any]:
        fields = dict(self.config.get("probe") or {})
        if name in self.toy_panels and self.null_pr_draws:  # the PR null in the probe's load (rule null_pr_toy)
            fields["null_pr_draws"] = self.null_pr_draws
        fields.update((self.config.get("probe_panel") or {}).get(name) or {})
        if self.config.get("device") not in (None, "auto"):
            fields["device"] = self.config["device"]
        return fields

    def probe_config(self, name: str) -> str:
        import json

        return json.dumps(self.probe_fields(name), sort_keys=True)

    def toy_probe_depends(self, name: str) -> str:
        """A toy probe's settings, + the library's defaults (a new ProbeConfig field re-probes) and the record format
        (a new one re-probes); the panel's own defaults come with its recipe.json."""
        import json

        from circuitdev.measure.config import ProbeConfig
        from circuitdev.sources.record_format import FORMAT

        return json.dumps({**self.probe_fields(name), "defaults": ProbeConfig().config_hash(), "format": FORMAT},
                          sort_keys=True)

    def probe_params(self, wildcards) -> str:
        """What a probe job's result depends on (besides code): its configuration and its revision's panel entry."""
        import json

        from circuitdev.sources.record_format import FORMAT

        p = self.panel(wildcards.panel)
        rev = p.revision(wildcards.revision)
        cfg = p.probe_config(**self.probe_fields(wildcards.panel))
        return json.dumps({"config_hash": cfg.config_hash(), "model": p.model, "family": p.family,
                           "revision": [rev.name, rev.tokens, rev.step], "source": p.source, "format": FORMAT},
                          sort_keys=True)

    def probe_inputs(self, wildcards) -> list[str]:
        name = wildcards.panel
        if name in self.toy_panels:
            return [f"{self.data}/toy/{name}/recipe.json"]
        p = self.panel(name)
        if not p.is_local:
            return []
        folder = p.revision_path(wildcards.revision)
        index = folder / "model.safetensors.index.json"
        return [str(index if index.is_file() else folder / "model.safetensors")]

    # --- pages -------------------------------------------------------------------------------------------------
    def _environment(self, panels: list[str] | None) -> str:
        import shlex

        from circuitdev.book.build import BuildFolders

        folders = BuildFolders(results_dir=Path(self.results).resolve(), data_dir=Path(self.data).resolve(),
                               published_dir=Path(self.published_dir()) if self.published_dir() else None,
                               panels=panels)
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(folders.environment().items()))

    def notebook_environment(self, name: str) -> str:
        """The build's folders for one page, as the environment its kernel starts with (`circuitdev.book.build`)."""
        return self._environment(list(self.notebooks[name]["panels"]))

    def notebook_parameters(self, name: str) -> str:
        import json

        return json.dumps(self.notebooks[name]["parameters"], sort_keys=True)

    def notebook_inputs(self, wildcards) -> dict[str, Any]:
        spec = self.notebooks[wildcards.name]
        return {"source": spec["source"],
                "records": [f for name in spec["panels"]
                            for f in [*self.records(name), *self.refines(name), *self.ablations(name),
                                      *self.null_prs(name)]],
                "published": self.published_target()}

    def notebook_outputs(self, wildcards=None) -> list[str]:
        """The executed pages the book renders: the notebooks and the workshop's sessions."""
        return ([f"{self.generated}/{name}.ipynb" for name in self.notebooks]
                + [f"{self.generated}/workshop/{s}.ipynb" for s in self.workshop_sessions])

    def workshop_inputs(self, wildcards) -> dict[str, Any]:
        """A session's source; when its solutions run, the toy panels' records and the authors' files it reads."""
        run = self.workshop_execute
        return {"source": self.workshop_sources[wildcards.session],
                # the sessions' checks, data lookup and pictures: a change there shows on the executed pages
                "code": sorted(str(p) for p in (self.basedir / "lib" / "circuitdev" / "workshop").rglob("*.py")),
                # the records after the refinements: the sessions read the panel with its refined revisions, as
                # the chapters do (load_panel(name, results_dir=...)), not the grid a refinement has not yet joined
                "records": [f for name in self.toy_panels for f in [*self.records(name), *self.refines(name)]]
                if run else [],
                "published": self.published_target() if run else [],
                "after": self.mini_run_before(wildcards.session) if run else []}

    def mini_run_sessions(self) -> list[str]:
        """The sessions whose solutions use the participant's mini run (`data.train_mini(`), the later one first:
        it trains the run, the earlier then reuses it (as a room's second session would). Run one after another:
        started together, one would wait on the other's lock holding a core idle (about 45 s of a fresh build)."""
        uses = [s for s, src in self.workshop_sources.items() if "train_mini(" in Path(src).read_text()]
        return sorted(uses, reverse=True)

    def mini_run_before(self, session: str) -> list[str]:
        """The executed session that must finish before `session` starts (the mini run's order), if any."""
        order = self.mini_run_sessions()
        at = order.index(session) if session in order else 0
        return [f"{self.generated}/workshop/{order[at - 1]}.ipynb"] if at > 0 else []

    def workshop_environment(self) -> str:
        return self._environment(None)

    def book_enabled(self) -> bool:
        value = self.config.get("book", "auto")
        if value == "auto":
            return (Path(self.book_root) / "_toc.yml").is_file()
        return bool(value)

    def book_inputs(self, wildcards=None) -> list[str]:
        root = Path(self.book_root)
        pages = sorted(str(p) for ext in ("*.md", "*.bib") for p in (root / "book").glob(ext))
        extra = [os.path.normpath(root / f) for f in ("_config.yml", "_toc.yml")]
        return [*self.notebook_outputs(), *pages, *extra]

    def book_config(self) -> str:
        """A generated copy of _config.yml with `repository_url` and the workshop edition (book.build.book_config)."""
        from circuitdev.book.build import book_config

        return str(book_config(self.config.get("repository_url") or None, workshop_edition=self.workshop_edition,
                               source=Path(self.book_root) / "_config.yml",
                               out=Path(self.book_root) / "_build" / "_config.generated.yml"))

    @property
    def workshop_edition(self) -> str:
        return str(self.config.get("workshop_edition") or "instructors")

    # --- a SLURM cluster: config `cluster:` (profiles/slurm; a local run ignores it but `gpu`) -------------------
    def _check_cluster_keys(self) -> None:
        unknown = sorted(set(self.config.get("cluster") or {}) - set(CLUSTER_KEYS))
        if unknown:
            raise ConfigError(f"config cluster: unknown setting(s) {', '.join(unknown)}; known: "
                              f"{', '.join(CLUSTER_KEYS)}")

    def cluster_setting(self, key: str) -> int | str | None:
        """One `cluster:` setting, None when unset; --config passes every value as a string ("2000", "null")."""
        value = (self.config.get("cluster") or {}).get(key)
        if value is None or str(value).strip().lower() in ("", "null", "none", "~"):
            return None
        if key in CLUSTER_NUMBERS:
            if not str(value).strip().isdigit():
                raise ConfigError(f"config cluster: {key}={value!r} must be a whole number >= 0 "
                                  "(config/pipeline.yaml)")
            return int(value)
        return str(value)

    def cluster_resources(self, kind: str = "cpu") -> dict[str, Any]:
        """A CPU job's or a hub probe's ("gpu") resources for the SLURM executor from config `cluster:` (the
        plugin's names: slurm_partition -> -p, mem_mb -> --mem, runtime -> -t, gpu/gpu_model -> --gpus, gres ->
        --gres, slurm_account -> -A). A null (or 0) setting is not asked for: the cluster's default applies."""
        c = self.cluster_setting
        if kind == "gpu":
            wanted = {"gpu": c("gpu"), "gpu_model": c("gpu_model"), "gres": c("gres"),
                      "slurm_partition": c("gpu_partition") or c("partition"), "mem_mb": c("gpu_mem_mb"),
                      "runtime": c("gpu_runtime")}
        else:
            wanted = {"slurm_partition": c("partition"), "mem_mb": c("mem_mb"), "runtime": c("runtime")}
        wanted["slurm_account"] = c("account")
        return {k: v for k, v in wanted.items() if v not in (None, 0)}

    def cluster_threads(self, n: int) -> int:
        """A job's threads (= the CPUs it asks a cluster for), at most `cluster: max_cpus`."""
        cap = self.cluster_setting("max_cpus")
        return max(1, min(int(n), cap)) if cap else int(n)

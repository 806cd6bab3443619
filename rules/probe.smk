# Probe records and what is computed from them per panel: refinements of the revision grid, the final circuit's
# ablation and the PR null over training. Included by the Snakefile (P, the build's Pipeline; PY, DATA, RESULTS,
# LOGS, TOY_PANELS, CPU_JOB, GPU_JOB).

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
        P.toy_done("{panel}"),
    wildcard_constraints:
        panel=alternatives(TOY_PANELS),
    params:
        panel_file=lambda wc: P.panel_file(wc.panel),
        probe_config=lambda wc: P.probe_config(wc.panel),
        depends=lambda wc: P.toy_probe_depends(wc.panel),
    threads: 1
    priority: 2  # the critical path (rule toy)
    resources: **CPU_JOB
    log:
        f"{LOGS}/probe/{{panel}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli probe --panel {params.panel_file:q} "
        "--out {RESULTS:q} --probe-config {params.probe_config:q} --no-progress > {log:q} 2>&1 && touch {output:q}"


rule probe_hub:
    """One revision of a hub panel: a 1B model, GPU advised (resources: gpu=1 for SLURM / --resources gpu=1)."""
    input:
        P.probe_inputs,
    output:
        parquet=f"{RESULTS}/{{panel}}/{{revision}}.parquet",
        sidecar=f"{RESULTS}/{{panel}}/{{revision}}.json",
    wildcard_constraints:
        panel=alternatives(P.hub_panels),
    params:
        panel_file=lambda wc: P.panel_file(wc.panel),
        probe_config=lambda wc: P.probe_config(wc.panel),
        depends=P.probe_params,
    resources: **GPU_JOB
    threads: P.cluster_threads(P.cluster_setting("gpu_cpus") or 4)
    log:
        f"{LOGS}/probe/{{panel}}/{{revision}}.log",
    shell:
        PROBE_SHELL


rule probe_local:
    """One revision of a toy or local-folder panel (small models: CPU is fine)."""
    input:
        P.probe_inputs,
    output:
        parquet=f"{RESULTS}/{{panel}}/{{revision}}.parquet",
        sidecar=f"{RESULTS}/{{panel}}/{{revision}}.json",
    wildcard_constraints:
        panel=alternatives(P.local_panels),
    params:
        panel_file=lambda wc: P.panel_file(wc.panel),
        probe_config=lambda wc: P.probe_config(wc.panel),
        depends=P.probe_params,
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
        lambda wc: [ancient(f) for f in P.records(wc.panel)] + P.refine_before(wc),
    output:
        f"{RESULTS}/{{panel}}/refine-{{metric}}-{{k}}.done",
    wildcard_constraints:
        panel=alternatives(P.refine_panels()),
        metric="[A-Za-z0-9_]+",
        k="[0-9]+",
    params:
        panel_file=lambda wc: P.panel_file(wc.panel),
    threads: 1
    priority: 2  # the critical path (rule toy)
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
        lambda wc: P.probed(wc.panel),
    output:
        f"{RESULTS}/{{panel}}/ablation_over_training.parquet",
    wildcard_constraints:
        panel=alternatives(TOY_PANELS),
    params:
        panel_file=lambda wc: P.panel_file(wc.panel),
    threads: 1
    priority: 2  # the critical path (rule toy)
    log:
        f"{LOGS}/ablate/{{panel}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli ablate "
        "--panel {params.panel_file:q} --over-training --out {RESULTS:q} --no-progress > {log:q} 2>&1"


rule null_pr_toy:
    """Each head's PR on random tokens at every revision of a toy panel (`circuitdev null-pr`), after its probe and
    refinements, before the notebooks: read from the records, whose probe measured it in the same load (config
    `null_pr_draws`), computed where a record has none; resumable, it recomputes only revisions whose record
    changed."""
    input:
        lambda wc: P.probed(wc.panel),
    output:
        f"{RESULTS}/{{panel}}/null_pr.parquet",
    wildcard_constraints:
        panel=alternatives(TOY_PANELS),
    params:
        panel_file=lambda wc: P.panel_file(wc.panel),
        draws=P.null_job_draws,
    threads: 1
    priority: 2  # the critical path (rule toy)
    log:
        f"{LOGS}/null_pr/{{panel}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli null-pr "
        "--panel {params.panel_file:q} --draws {params.draws} --out {RESULTS:q} --no-progress > {log:q} 2>&1"

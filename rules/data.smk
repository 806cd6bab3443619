# The authors' files and the toy models: the two sources every other job reads. Included by the Snakefile (P, the
# build's Pipeline, and the shell names PY, DATA, LOGS, PUBLISHED come from there).

if PUBLISHED is not None:

    rule published:
        """Make <data_dir>/published hold every file of the manifest (sha256-checked), copied from a local copy
        (`published_from`, $CIRCUITDEV_PUBLISHED, `make book PUBLISHED_DIR=...`) or downloaded at the pinned
        commits; offline with no copy it prints one line and the pages note the missing tier. Never fails. The copy
        reaches the shell as $CIRCUITDEV_PUBLISHED_FROM, not as a parameter: the same files given another way re-run
        nothing (`Pipeline.forget_stale_published_status` says when it runs again)."""
        input:
            P.manifest,
        output:
            P.published_status,
        resources: **CPU_JOB
        shell:
            "{PY:q} -m circuitdev.cli published ensure --to {PUBLISHED:q} "
            '${{CIRCUITDEV_PUBLISHED_FROM:+--from "$CIRCUITDEV_PUBLISHED_FROM"}} --status {output:q}'


# One job per toy panel, one thread each (1 thread per process was far faster than 2 on a busy 2-core machine:
# circuitdev.workshop.machine; the shipped panels were trained with 1): each panel's probe, ablation and PR null
# start as soon as its own training ends, and two panels train at once on two cores.
rule toy:
    """Train (or reuse) one toy model: <data_dir>/toy/<panel>/ and <data_dir>/panels/<panel>.yaml."""
    output:
        f"{DATA}/toy/{{panel}}/recipe.json",
    wildcard_constraints:
        panel=alternatives(TOY_PANELS),
    params:
        args=lambda wc: P.toy_train_args(wc.panel),
    threads: 1
    priority: 3  # the critical path: toy -> probe -> ablation -> the pages over all panels
    resources: **CPU_JOB
    log:
        f"{LOGS}/toy/{{panel}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {PY:q} -m circuitdev.cli toy train {params.args} "
        "--data-dir {DATA:q} --jobs 1 --threads {threads} --no-progress > {log:q} 2>&1"

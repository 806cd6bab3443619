# The pages: each notebook executed (papermill), each workshop session's book edition, and the book. Included by the
# Snakefile (P, the build's Pipeline; PY, BIN, GEN, LOGS, BOOK_ROOT, CPU_JOB). One thread per job, as every job of
# this pipeline: on two cores two one-thread jobs beat one two-thread job (circuitdev.workshop.machine measured it).


rule notebook:
    input:
        unpack(P.notebook_inputs),
    output:
        f"{GEN}/{{name}}.ipynb",
    params:
        parameters=lambda wc: P.notebook_parameters(wc.name),
        environment=lambda wc: P.notebook_environment(wc.name),
        cwd=absolute(BOOK_ROOT),
        kernel=config.get("kernel", "python3"),
    threads: 1
    resources: **CPU_JOB
    log:
        f"{LOGS}/notebooks/{{name}}.log",
    shell:
        # the page's own parameters as papermill parameters, the build's folders as its environment
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {params.environment} {PY:q} -m circuitdev.cli notebook run {input.source:q} --as {wildcards.name} "
        "--out {GEN:q} --parameters {params.parameters:q} --cwd {params.cwd:q} --kernel {params.kernel} > {log:q} 2>&1"


rule workshop:
    """One session of the Workshop part: `circuitdev workshop build SOURCE --edition book` -> <generated_dir>/workshop/
    (exercise and folded solution blocks; the solutions executed per `workshop: execute`). Sessions 2 and 4
    share the participant's `mini` run: a lock next to its checkpoints serialises them."""
    input:
        unpack(P.workshop_inputs),
    output:
        f"{GEN}/workshop/{{session}}.ipynb",
    wildcard_constraints:
        session=alternatives(P.workshop_sessions),
    params:
        environment=P.workshop_environment(),
        execute="" if P.workshop_execute else "--no-execute",
        out=f"{GEN}/workshop",
    threads: 1
    priority: 1  # before the pages: session 4 (the mini run's training, ~1.5 min) and then 2 must not be the tail
    resources: **CPU_JOB
    log:
        f"{LOGS}/workshop/{{session}}.log",
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} {params.environment} {PY:q} -m circuitdev.cli workshop build {input.source:q} --edition book "
        "--out {params.out:q} {params.execute} > {log:q} 2>&1"


rule book:
    input:
        P.book_inputs,
    output:
        P.book_html,
    params:
        # `repository_url` (empty by default): the repository and launch buttons; `workshop_edition` (instructors by
        # default; participants: the workshop's solutions left out, `make book WORKSHOP_EDITION=participants`): a
        # generated copy of _config.yml (circuitdev.book.build.book_config)
        config=lambda wc: P.book_config(),
        repository=config.get("repository_url") or "",
        workshop_edition=P.workshop_edition,  # another edition re-runs the build
    log:
        f"{LOGS}/book.log",
    shell:
        # --all: the intro quotes numbers glued on other pages, so an incremental build could leave them stale;
        # -W: Sphinx warnings are errors.
        "{BIN}/jupyter-book build {BOOK_ROOT:q} --config {params.config:q} --all -W --keep-going > {log:q} 2>&1"

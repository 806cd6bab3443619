# The authors' files and the toy models: the two sources every other job reads. Included by the Snakefile (P, the
# build's Pipeline, and the shell names PY, DATA, LOGS, PUBLISHED come from there).
import json
import shlex


if PUBLISHED is not None:

    rule published:
        """Make <data_dir>/published hold every file of the manifest (sha256-checked), copied from a local copy
        (`published_from`, $CIRCUITDEV_PUBLISHED, `make book PUBLISHED_DIR=...`) or downloaded at the pinned
        commits; offline with no copy it prints one line and the pages note the missing tier. Never fails."""
        input:
            P.manifest,
        output:
            P.published_status,
        params:
            source=f"--from {shlex.quote(str(P.published_from))}" if P.published_from else "",
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
        threads: P.cluster_threads(min(3, len(TOY_PANELS)))
        resources: **CPU_JOB
        log:
            f"{LOGS}/toy.log",
        shell:
            "{PY:q} -m circuitdev.cli toy train {params.families} {params.seeds} {params.sets} --data-dir {DATA:q} --jobs {threads} "
            "--no-progress > {log:q} 2>&1"

"""The provenance line under every figure: which tiers, panels, revisions and probe configurations it draws, which
commits computed the records, and which commit drew it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from circuitdev.runinfo import code_commit

if TYPE_CHECKING:
    from circuitdev.book.tiers import Tier


def _tier_clause(t: "Tier", panels: Sequence[str] | None, revisions: Sequence[str] | None) -> str | None:
    """"<tier> — p1, p2; <n> revisions each (first…last); config <hash>[; records <commit>]"."""
    chosen = [p for p in t.panels if panels is None or p in panels]
    if not chosen:
        return None
    rows = t.table[t.table["panel"].isin(chosen)]
    if revisions:
        rows = rows[rows["revision"].isin(revisions)]
    revs = rows.drop_duplicates(["panel", "revision"]).sort_values("tokens_b")
    counts = revs.groupby("panel", sort=False).size()
    if len(chosen) == 1 and len(revs):
        n = int(counts.iloc[0])
        span = f"{n} revision{'s' if n != 1 else ''} ({revs['revision'].iloc[0]}…{revs['revision'].iloc[-1]})"
    elif counts.nunique() == 1:
        span = f"{int(counts.iloc[0])} revisions each"
    else:
        span = "revisions: " + ", ".join(f"{p} {n}" for p, n in counts.items())
    configs = sorted({t.configs.get(p, "?") for p in chosen})
    commits = f"; records {', '.join(sorted(t.commits))}" if t.commits else ""
    return f"{t.name} — {', '.join(chosen)}; {span}; config {', '.join(configs)}{commits}"


def provenance_line(tiers: Sequence["Tier"], *, panels: Sequence[str] | None = None,
                    revisions: Sequence[str] | None = None, extra: Sequence[str] = ()) -> str:
    """"Source: published — pythia-1b, …; 10 revisions each; config … | toy — … · code 1a2b3c4d": for each tier
    its panels, revisions and probe-configuration hash (and the commits that computed its records), then the commit
    of the code that drew it. `extra` adds clauses for sources that are not tiers (e.g. the paper's claims)."""
    parts = [c for t in tiers if (c := _tier_clause(t, panels, revisions))] + list(extra)
    return f"Source: {' | '.join(parts) if parts else 'no data'} · code {code_commit()}"

"""Summaries of a probed toy panel: what formed, where, and when (used by the report and the book snippet)."""

from __future__ import annotations

import pandas as pd


def heads_at(table: pd.DataFrame, column: str, threshold: float) -> list[tuple[int, int, float]]:
    hit = table[table[column] >= threshold].sort_values(["layer", "head"])
    return [(int(r.layer), int(r.head), float(getattr(r, column))) for r in hit.itertuples()]


def formation_summary(df: pd.DataFrame, *, induction: float = 50.0, sink: float = 30.0) -> pd.DataFrame:
    """One row per revision (in token order): counts and layers of induction heads (sel_induction >= induction),
    second-A sinks (sel_first_token >= sink) and all-query sinks (sel_first_token_allq >= sink), with the largest
    all-query attention mass on position 0 beside them. `df` is a developmental table (`store.load_panel_table`)."""
    rows = []
    for (rev, tokens), t in df.groupby(["revision", "tokens"], sort=False):
        ind, s2a, saq = (heads_at(t, c, th) for c, th in (("sel_induction", induction), ("sel_first_token", sink),
                                                            ("sel_first_token_allq", sink)))
        rows.append({
            "revision": rev, "tokens": int(tokens),
            "n_induction": len(ind), "induction_layers": sorted({l for l, _, _ in ind}),
            "n_sink_2a": len(s2a), "sink_2a_layers": sorted({l for l, _, _ in s2a}),
            "n_sink_allq": len(saq), "sink_allq_layers": sorted({l for l, _, _ in saq}),
            "max_mass_first_allq": float(t["mass_first_token_allq"].max()),
        })
    return pd.DataFrame(rows).sort_values("tokens").reset_index(drop=True)


def first_formed(summary: pd.DataFrame, column: str, at_least: int = 1) -> str | None:
    """The first revision whose count in `column` reaches `at_least` (None if never)."""
    hit = summary[summary[column] >= at_least]
    return None if hit.empty else str(hit.iloc[0]["revision"])

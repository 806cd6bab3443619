"""What a claim hangs on at the paper's bar: the head that decides it, its value, its margin to the bar (value / bar)
and the bars over which that head keeps deciding it the same way (issue 21).

A count milestone "n_c(tau) >= k" holds at a revision exactly when the k-th strongest head of class c there reads
at least tau, so the whole milestone is a function of one number per revision, `kth_strongest`: it is first reached
at revision r for every bar in (max of the k-th values before r, the k-th value at r]. `milestone_margin` gives that
head and interval for each panel; `hangs_on(dev, claim)` words it for every claim of `robustness.ROBUSTNESS_CLAIMS`
(F1: the strongest floor head; F2: the largest jump's share against the transition share; F3: the deciding head of
each milestone of the gap; F4: the deciding circuit head of each recall level; F5: the median lead and how many of
its heads are censored). First-hit milestones only: the paper's rule.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import final_circuit, head_mask, head_name, index
from circuitdev.analysis.findings.basics import EPS
from circuitdev.analysis.findings.f1_floor import floor_margin
from circuitdev.analysis.findings.f2_shapes import bos_fraction, trajectory_shape
from circuitdev.analysis.findings.f3_milestones import (BOUND_SIGNS, PAPER_MILESTONES, Milestone, milestone,
                                                        milestone_gap, milestones)
from circuitdev.analysis.findings.f4_convergence import circuit_recall, recall_milestones
from circuitdev.analysis.findings.f5_pr_lead import FORMATION_THRESHOLDS, pr_lead
from circuitdev.analysis.findings.robustness import CLASS_VARIED, robust_claim
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import BOS_THRESHOLD, INDUCTION_THRESHOLD, sel_column

HANGS_ON_COLUMNS = ["claim", "panel", "item", "varied", "bar", "head", "revision", "tokens_b", "head_value", "margin",
                    "stays_from", "stays_to", "text"]


def _k(spec: Milestone, n_heads: int) -> int:
    return spec.min_heads if spec.min_heads is not None else max(1, math.ceil(spec.min_fraction * n_heads - EPS))


def kth_strongest(dev: pd.DataFrame, spec: Milestone, *, rule: CountingRule = "per-class") -> pd.DataFrame:
    """Per (panel, revision): the head whose selectivity is the k-th largest of the milestone's class (k = its
    min_heads, or its min_fraction of the heads rounded up; under best-class only heads whose best class it is):
    columns of findings.revisions + k, head, value (NaN / None when fewer than k heads qualify)."""
    ix = index(dev)
    col = sel_column(spec.head_class)
    eligible = head_mask(dev, spec.head_class, threshold=np.finfo(float).tiny, rule=rule)
    value = np.where(eligible, dev[col].to_numpy(dtype=float), -np.inf)
    order = np.lexsort((-value, ix.codes))  # by revision, strongest first
    starts = np.searchsorted(ix.codes[order], np.arange(len(ix.cols["revision"])))
    ends = np.r_[starts[1:], len(order)]
    ks, heads, values = [], [], []
    for a, b, n in zip(starts, ends, ix.cols["n_heads"]):
        k = _k(spec, int(n))
        i = order[a + k - 1] if b - a >= k and np.isfinite(value[order[a + k - 1]]) else None
        ks.append(k)
        heads.append(head_name(dev["layer"].iloc[i], dev["head"].iloc[i]) if i is not None else None)
        values.append(float(value[i]) if i is not None else np.nan)
    return ix.frame(k=ks, head=heads, value=values)


def milestone_margin(dev: pd.DataFrame, spec: Milestone, *, rule: CountingRule = "per-class",
                     gap: tuple[str, str] | None = None) -> pd.DataFrame:
    """Per panel, what a milestone hangs on at its bar: revision (where it is first reached: findings.milestones),
    head / head_value (the k-th strongest head there), margin = head_value / bar, and the bars for which it is first
    reached at that same revision, (stays_from, stays_to] (stays_from -inf at the first probed revision). Where it is
    never reached: stays_from = NaN and stays_to = the largest k-th value at any revision (it would be reached at
    or below that bar). next_value: the deciding head at the next revision (a head that falls back below the bar
    made the milestone by one look). `hangs_on`: all of it in one sentence, with where the milestone moves above stays_to and,
    given `gap` (the start and end milestone names of a gap, `spec` one of them), what the gap becomes there."""
    kth = kth_strongest(dev, spec, rule=rule)
    first = milestones(dev, specs=[spec], rule=rule).set_index("panel")
    rows = []
    for panel, g in kth.groupby("panel", sort=False):
        rev = first.loc[panel, "revision"]
        v = g["value"].to_numpy(dtype=float)
        if pd.isna(rev):
            j = int(np.nanargmax(np.nan_to_num(v, nan=-np.inf))) if np.isfinite(v).any() else None
            rows.append({"panel": panel, "k": int(g["k"].iloc[0]), "revision": None, "tokens_b": np.nan,
                         "bound": "lower", "head": g["head"].iloc[j] if j is not None else None, "head_value": np.nan,
                         "stays_from": np.nan, "stays_to": v[j] if j is not None else np.nan})
            continue
        i = int(np.flatnonzero(g["revision"].to_numpy() == rev)[0])
        before = np.nan_to_num(v[:i], nan=-np.inf)
        after = _head_value(dev, panel, g["revision"].iloc[i + 1], g["head"].iloc[i], spec.head_class) \
            if i + 1 < len(g) else np.nan
        rows.append({"panel": panel, "k": int(g["k"].iloc[i]), "revision": rev,
                     "tokens_b": float(g["tokens_b"].iloc[i]), "bound": first.loc[panel, "bound"], "head": g["head"].iloc[i], "head_value": v[i],
                     "stays_from": float(before.max()) if i > 0 else -np.inf, "stays_to": v[i], "next_value": after})
    out = pd.DataFrame(rows, columns=["panel", "k", "revision", "tokens_b", "bound", "head", "head_value",
                                      "stays_from", "stays_to", "next_value"])
    out = out.assign(bar=spec.threshold, margin=out["head_value"] / spec.threshold)
    return out.assign(hangs_on=[_milestone_text(spec, m, m["k"], dev[dev["panel"] == m["panel"]], rule, gap)
                                for m in out.to_dict("records")])


def _head_value(dev: pd.DataFrame, panel: str, revision: str, head: str, head_class: str) -> float:
    layer, h = (int(x) for x in head.removeprefix("L").split("H"))
    hit = dev.loc[(dev["panel"] == panel) & (dev["revision"] == revision) & (dev["layer"] == layer)
                  & (dev["head"] == h), sel_column(head_class)]
    return float(hit.iloc[0]) if len(hit) else np.nan


def _ordinal(k: int) -> str:
    return {1: "strongest", 2: "2nd-strongest", 3: "3rd-strongest"}.get(k, f"{k}th-strongest")


def _tokens(t: float) -> str:
    """Tokens (in billions) as the book writes them: 3.05T, 264B, 6.29B, 536M, 2.05k tokens."""
    for scale, unit in ((1e3, "T"), (1, "B"), (1e-3, "M"), (1e-6, "k")):
        if t >= scale:
            return f"{t / scale:.3g}{unit}"
    return f"{t * 1e9:.3g} tokens"


def _ratio(v: float) -> str:
    return f"{v:.1f}×" if v < 100 else f"{v:.0f}×"


def _milestone_text(spec: Milestone, m: dict, k: int, dev: pd.DataFrame, rule: str,
                    gap: tuple[str, str] | None) -> str:
    """One milestone's margin in words; with `gap` (start, end milestone names, one of them `spec`), also what the
    gap becomes where the milestone moves."""
    what = f"the milestone {spec.short()}"
    if pd.isna(m["revision"]):
        reach = f" (it would be at bars up to {m['stays_to']:.3g}×)" if np.isfinite(m["stays_to"]) else ""
        return f"{what} is never reached{reach}"
    where = f"≤ {_tokens(m['tokens_b'])} (the first probed revision)" if m["bound"] == "upper" \
        else _tokens(m["tokens_b"])
    low = "-∞" if not np.isfinite(m["stays_from"]) else f"{m['stays_from']:.3g}×"
    back = f", falling back to {m['next_value']:.3g}× at the next revision" \
        if m.get("next_value", np.nan) < spec.threshold else ""
    text = (f"{what} is first reached at {where} because {m['head']}, the {_ordinal(k)} {spec.head_class} head "
            f"there, reads {m['head_value']:.3g}× ({m['head_value'] / spec.threshold:.2f}× the bar{back}; the same "
            f"revision for bars in ({low}, {m['stays_to']:.3g}×])")
    moved = Milestone(spec.name, spec.head_class, float(np.nextafter(m["stays_to"], np.inf)), spec.min_heads,
                      spec.min_fraction)
    after = milestones(dev, specs=[moved], rule=rule)
    text += f"; above {m['stays_to']:.3g}× it " + (f"moves to {_tokens(after['tokens_b'].iloc[0])}" if
                                                     pd.notna(after["revision"].iloc[0]) else "is never reached")
    if gap is not None:
        other = milestones(dev, specs=[milestone(next(n for n in gap if n != spec.name))], rule=rule)
        g = milestone_gap(pd.concat([after, other], ignore_index=True), start=gap[0], end=gap[1]).iloc[0]
        if np.isfinite(g["bound_ratio"]):
            text += f" and the gap becomes {BOUND_SIGNS.get(g['bound'], '')}{_ratio(g['bound_ratio'])}"
    return text


def hangs_on(dev: pd.DataFrame, claim: str, *, rule: CountingRule = "per-class") -> pd.DataFrame:
    """What `claim` (an id of ROBUSTNESS_CLAIMS) hangs on at the paper's bar, per panel (and item): HANGS_ON_COLUMNS,
    `text` a plain sentence ("the milestone ... is first reached at 23B because L2H7, the 3rd-strongest induction
    head there, reads 54.8× (1.10× the bar); it stays there for bars above 36.9× up to 54.8×; ...")."""
    robust_claim(claim)
    rows = []
    if claim == "F1.floor":
        fm = floor_margin(dev)
        for panel, g in fm.groupby("panel", sort=False):
            r = g.loc[g["value"].idxmax()]
            rows.append({"panel": panel, "item": "L0+L1", "varied": "first_token", "bar": BOS_THRESHOLD,
                         "head": r["name"], "revision": r["revision"], "tokens_b": r["tokens_b"],
                         "head_value": r["value"], "margin": r["value"] / BOS_THRESHOLD, "stays_from": r["value"],
                         "stays_to": np.inf,
                         "text": f"the strongest first-token head in layers 0/1, {r['name']} at "
                                 f"{_tokens(r['tokens_b'])}, reads {r['value']:.3g}× ({r['value'] / BOS_THRESHOLD:.0%}"
                                 f" of the {BOS_THRESHOLD:g}× bar): the floor fails for bars at or below "
                                 f"{r['value']:.3g}×"})
    elif claim == "F2.shapes":
        for r in trajectory_shape(bos_fraction(dev, rule=rule)).itertuples():
            rows.append({"panel": r.panel, "item": r.shape, "varied": "first_token", "bar": BOS_THRESHOLD,
                         "head": None, "revision": r.jump_to_revision, "tokens_b": r.jump_to_tokens_b,
                         "head_value": r.jump_share, "margin": r.jump_share / 0.5, "stays_from": np.nan,
                         "stays_to": np.nan,
                         "text": (f"its largest jump ({_tokens(r.jump_from_tokens_b)} → "
                                  f"{_tokens(r.jump_to_tokens_b)}) carries {r.jump_share:.0%} of the total rise "
                                  f"({r.jump_share / 0.5:.2f}× the 50% a transition needs)")
                         if np.isfinite(r.jump_share) else "its share of sink heads never rises: no shape to call"})
    elif claim == "F3.gap":
        rows += _gap_rows(dev, rule)
    elif claim == "F3.milestones":
        for spec in PAPER_MILESTONES:
            for m in milestone_margin(dev, spec, rule=rule).to_dict("records"):
                rows.append({**{c: m[c] for c in ("panel", "head", "revision", "tokens_b", "head_value", "margin",
                                                  "stays_from", "stays_to")},
                             "item": spec.name, "varied": CLASS_VARIED[spec.head_class], "bar": spec.threshold,
                             "text": m["hangs_on"]})
    elif claim == "F4.recall":
        rows += _recall_rows(dev, rule)
    elif claim == "F5.lead":
        for head_class in ("induction", "previous-token", "first-token"):
            leads = pr_lead(dev, head_class=head_class) if "pr" in dev.columns and dev["pr"].notna().any() \
                else pd.DataFrame()
            for panel, g in (leads.groupby("panel", sort=False) if len(leads) else []):
                lead = pd.to_numeric(g["lead_checkpoints"], errors="coerce").astype(float)
                listed = ", ".join(f"{n} {v:g}" if np.isfinite(v) else f"{n} undefined"
                                   for n, v in list(zip(g["name"], lead))[:6]) + \
                    (f" and {len(g) - 6} more" if len(g) > 6 else "")
                at_first = int(((g["formation_index"] == 0) | (g["elevation_index"] == 0)).fillna(False).sum())
                median = float(lead.median()) if lead.notna().any() else np.nan
                said = f"the median lead is {median:g} checkpoint{'' if median == 1 else 's'}" if np.isfinite(median) \
                    else "no lead (no head both forms and has an elevated PR)"
                rows.append({"panel": panel, "item": head_class, "varied": CLASS_VARIED[head_class], "head": None,
                             "bar": FORMATION_THRESHOLDS[head_class], "head_value": median, "margin": np.nan,
                             "text": f"{said} over the {lead.count()} of {len(g)} {head_class} heads with a lead "
                                     f"(each head's: {listed}); {at_first} of the {len(g)} formed or were elevated at the first "
                                     "probed revision, where a lead is a bound"})
    out = pd.DataFrame(rows).assign(claim=claim) if rows else pd.DataFrame(columns=HANGS_ON_COLUMNS)
    return out.reindex(columns=HANGS_ON_COLUMNS)


def _gap_rows(dev: pd.DataFrame, rule: CountingRule, start: str = "induction_3_heads",
              end: str = "bos_50pct") -> list[dict]:
    """F3's gap per panel hangs on the more fragile of its two milestones (the smaller margin to its bar); a censored
    milestone makes the gap a bound, said too."""
    rows = []
    both = {n: milestone_margin(dev, milestone(n), rule=rule, gap=(start, end)).set_index("panel")
            for n in (start, end)}
    for panel in both[start].index:
        margins = {n: both[n].loc[panel, "margin"] for n in (start, end)}
        name = min(margins, key=lambda n: margins[n] if np.isfinite(margins[n]) else np.inf)
        m, spec = both[name].loc[panel], milestone(name)
        censored = [milestone(n).short() for n in (start, end) if both[n].loc[panel, "bound"] != "exact"]
        note = f"; {' and '.join(censored)} censored (at the first probed revision or never reached): the gap is a " \
            "bound" if censored else ""
        rows.append({"panel": panel, "item": name, "varied": CLASS_VARIED[spec.head_class], "bar": spec.threshold,
                     **{c: m[c] for c in ("head", "revision", "tokens_b", "head_value", "margin", "stays_from",
                                          "stays_to")}, "text": m["hangs_on"] + note})
    return rows


def _recall_rows(dev: pd.DataFrame, rule: CountingRule) -> list[dict]:
    recall = circuit_recall(dev, rule=rule)
    circuit = final_circuit(dev, rule=rule)
    col = sel_column("induction")
    rows = []
    for m in recall_milestones(recall).to_dict("records"):
        heads = circuit[circuit["panel"] == m["panel"]]
        if pd.isna(m["revision"]) or heads.empty:
            continue
        at = dev[(dev["panel"] == m["panel"]) & (dev["revision"] == m["revision"])].merge(
            heads[["layer", "head"]], on=["layer", "head"]).sort_values(col, ascending=False)
        k = max(1, math.ceil(m["level"] * len(heads) - EPS))
        r = at.iloc[k - 1]
        name, value = head_name(r["layer"], r["head"]), float(r[col])
        rows.append({"panel": m["panel"], "item": f"{m['level_pct']}%", "varied": "induction",
                     "bar": INDUCTION_THRESHOLD, "head": name, "revision": m["revision"], "tokens_b": m["tokens_b"],
                     "head_value": value, "margin": value / INDUCTION_THRESHOLD, "stays_from": np.nan,
                     "stays_to": np.nan,
                     "text": f"{m['level_pct']}% at {_tokens(m['tokens_b'])}: {name} reads {value:.3g}× "
                             f"({value / INDUCTION_THRESHOLD:.2f}× the bar)"})
    return rows



"""F1, the layer floor: heads of a class per layer, whether the first layers never hold a BOS head, how close they
come to the bar (per revision, and the strongest floor head of a whole run as a share of the bar) and the verdict per
panel (holds / fails / within noise, from the bootstrap replicates), with the attention mass a bar means at a context
length."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_mask, index, require
from circuitdev.errors import ConfigError
from circuitdev.analysis.findings.basics import BOS
from circuitdev.analysis.findings.claim import ALL, COUNTING_RULES, RobustClaim, claim_row, hangs_on_row, tokens_text
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import BOS_THRESHOLD, check_head_class, head_name, sel_column

__all__ = ["layer_counts", "floor_check", "floor_summary", "bar_mass", "floor_margin", "floor_headroom",
           "floor_verdict"]


def layer_counts(dev: pd.DataFrame, *, head_class: str = BOS, threshold: float = BOS_THRESHOLD,
                 rule: CountingRule = "per-class", boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F1: heads of `head_class` per layer at every revision (the paper's tables 2-3 use first-token >= 30x).

    Columns: panel, revision, revision_index, tokens_b, layer, n (every layer listed, zeros included); with `boot`
    (bootstrap replicates) also n_lo, n_hi."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: layer_counts(d, head_class=head_class,
                                          threshold=threshold, rule=rule), columns=["n"])
    ix = index(dev)
    n_revs = len(ix.cols["revision"])
    layers = dev["layer"].to_numpy(dtype=int)
    n_layers = int(layers.max()) + 1
    hits = np.bincount(ix.codes * n_layers + layers, weights=head_mask(dev, head_class, threshold=threshold, rule=rule),
                       minlength=n_revs * n_layers).astype(int)
    top_layer = np.full(n_revs, -1)
    np.maximum.at(top_layer, ix.codes, layers)  # a panel with fewer layers lists only its own
    keep = np.tile(np.arange(n_layers), n_revs) <= np.repeat(top_layer, n_layers)
    rows = np.repeat(np.arange(n_revs), n_layers)[keep]
    return pd.DataFrame({**{c: ix.cols[c][rows] for c in ("panel", "revision", "revision_index", "tokens_b")},
                         "layer": np.tile(np.arange(n_layers), n_revs)[keep], "n": hits[keep]})


def floor_check(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                threshold: float = BOS_THRESHOLD, rule: CountingRule = "per-class",
                boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F1 floor: does every run have zero `head_class` heads in `layers` (the paper: no BOS head in L0/L1 ever)?

    One row per (panel, revision): panel, revision, tokens_b, n_floor (heads counted in `layers`), holds; with
    `boot` also n_floor_lo, n_floor_hi. The runs that break the floor are `out[~out.holds]`."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: floor_check(d, layers=layers, head_class=head_class,
                                          threshold=threshold, rule=rule), columns=["n_floor"])
    ix = index(dev)
    n_floor = ix.count(head_mask(dev, head_class, threshold=threshold, rule=rule)
                       & np.isin(dev["layer"].to_numpy(), list(layers)))
    return pd.DataFrame({**{c: ix.cols[c] for c in ("panel", "revision", "revision_index", "tokens_b")},
                         "n_floor": n_floor, "holds": n_floor == 0})


def floor_summary(floor: pd.DataFrame, *, by: Sequence[str] = ("panel",)) -> pd.DataFrame:
    """F1 per group of `floor_check` rows (e.g. by panel, or by tier with a `tier` column): runs, held (runs whose
    floor layers hold no head of the class), most (the most such heads at any run), broken ("never broken" or
    "broken at <panel> <revision>, ...")."""
    require(floor, [*by, "panel", "revision", "n_floor", "holds"], "floor_summary", allow_empty=True)
    rows = []
    for key, g in floor.groupby(list(by), sort=False):
        bad = g[~g["holds"]]
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "runs": len(g),
                     "held": int(g["holds"].sum()), "most": int(g["n_floor"].max()),
                     "broken": "broken at " + ", ".join(f"{p} {r}" for p, r in zip(bad["panel"], bad["revision"]))
                     if len(bad) else "never broken"})
    return pd.DataFrame(rows, columns=[*by, "runs", "held", "most", "broken"])


def bar_mass(selectivity: float | np.ndarray, seq_len: int) -> float | np.ndarray:
    """The attention mass on position 0 that first-token selectivity `selectivity` means at context length T =
    `seq_len` when the rest of the row is spread evenly over the other T - 1 keys: s = m (T - 1) / (1 - m), so
    m = s / (s + T - 1). The same bar asks for more mass at a shorter context: 30x is m = 0.32 at T = 64 but 0.105
    at T = 256 (the paper's), so a toy probed at T = 64 meets a harder bar than the paper's models."""
    if seq_len < 2:
        raise ConfigError(f"seq_len must be at least 2 to have keys besides position 0, got {seq_len}")
    s = np.asarray(selectivity, dtype=float)
    out = s / (s + seq_len - 1)
    return float(out) if out.ndim == 0 else out


def floor_margin(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                 boot: pd.DataFrame | None = None, column: str | None = None) -> pd.DataFrame:
    """F1, how close the floor comes to the bar: per (panel, revision) the head of `layers` with the largest
    `head_class` selectivity. Columns: panel, revision, revision_index, tokens_b, name, value, value_lo / value_hi,
    value_boot_mean, value_widened: with `boot`, the interval of the maximum itself, re-taken over the floor heads
    on every replicate (a maximum over noisy heads is biased upwards, so its resamples may centre above the point:
    read value_boot_mean beside it, and value_widened says the interval was widened to include the point); NaN
    (widened False) without `boot` or for panels without replicates (the published tier). `column`: another score
    of the class than its selectivity column (the toy's sel_first_token_allq)."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: floor_margin(d, layers=layers, head_class=head_class,
                                                                            column=column)
                                          .iloc[:, :6], columns=["value"], discrete=False)
    col = column or sel_column(check_head_class(head_class))
    ix = index(dev)
    floor = np.flatnonzero(np.isin(dev["layer"].to_numpy(), list(layers)))
    order = floor[np.lexsort((-dev[col].to_numpy(dtype=float)[floor], ix.codes[floor]))]
    top = order[np.r_[True, np.diff(ix.codes[order]) != 0]] if len(order) else order  # best floor head per revision
    at = np.full(len(ix.cols["revision"]), -1)
    at[ix.codes[top]] = top
    value = np.where(at >= 0, dev[col].to_numpy(dtype=float)[np.maximum(at, 0)], np.nan)
    names = [head_name(dev["layer"].iloc[i], dev["head"].iloc[i]) if i >= 0 else None for i in at]
    nan = np.full(len(at), np.nan)
    return pd.DataFrame({**{c: ix.cols[c] for c in ("panel", "revision", "revision_index", "tokens_b")},
                         "name": names, "value": value, "value_lo": nan, "value_hi": nan, "value_boot_mean": nan,
                         "value_widened": np.zeros(len(at), bool)})


def floor_headroom(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                   threshold: float = BOS_THRESHOLD, overall: bool = False) -> pd.DataFrame:
    """F1's margin per panel: the strongest `head_class` selectivity of any head of `layers` at any revision, where
    it is, and how it compares with the bar. The floor holds at bar `threshold` iff value < threshold, so it fails
    at every bar <= value: `fails_at_or_below` is the bar below which the paper's statement breaks (e.g. OLMo's L1
    head at 28.1x: the floor holds at 30x by a margin of 6%). overall=True adds a row "all" for the strongest over
    every panel (the paper states the floor for all its models at once). Columns: panel, runs, name, revision,
    tokens_b, value, threshold, share_of_bar (value / threshold), margin (1 - share_of_bar), holds,
    fails_at_or_below, where ("L1H1 at step2000-tokens4B reads 28.1× (94% of the bar)")."""
    col = sel_column(check_head_class(head_class))
    require(dev, ["panel", "revision", "tokens_b", "layer", "head", col], "floor_headroom")
    panels = dev["panel"].to_numpy()
    in_floor = np.isin(dev["layer"].to_numpy(), list(layers))
    value = dev[col].to_numpy(dtype=float)
    groups = [(p, np.flatnonzero(panels == p)) for p in pd.unique(panels)]
    if overall:
        groups.append(("all", np.arange(len(dev))))
    rows = []
    for panel, at in groups:
        here = at[in_floor[at]]
        row = {"panel": panel, "runs": len(set(zip(panels[at], dev["revision"].to_numpy()[at]))),
               "threshold": float(threshold)}
        if len(here):
            i = here[np.argmax(value[here])]
            name, revision = head_name(dev["layer"].iloc[i], dev["head"].iloc[i]), dev["revision"].iloc[i]
            where = f"{name} at {revision} reads {value[i]:.1f}× ({value[i] / threshold:.0%} of the bar)"
            row.update(name=name, revision=revision, tokens_b=float(dev["tokens_b"].iloc[i]), value=value[i],
                       where=f"{panels[i]} {where}" if panel == "all" else where)
        rows.append(row)
    out = pd.DataFrame(rows, columns=["panel", "runs", "name", "revision", "tokens_b", "value", "threshold", "where"])
    out["share_of_bar"] = out["value"] / out["threshold"]
    out["margin"] = 1 - out["share_of_bar"]
    out["holds"] = ~(out["value"] >= out["threshold"])  # no floor head at all: holds
    out["fails_at_or_below"] = out["value"]
    out["where"] = out["where"].fillna("no head in the floor layers")
    return out[["panel", "runs", "name", "revision", "tokens_b", "value", "threshold", "share_of_bar", "margin",
                "holds", "fails_at_or_below", "where"]]


def floor_verdict(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                  threshold: float = BOS_THRESHOLD, rule: CountingRule = "per-class",
                  boot: pd.DataFrame | None = None, level: float = uncertainty.LEVEL,
                  seq_len: int | Mapping[str, int] | None = None) -> pd.DataFrame:
    """F1 per panel: "holds", "fails" or "within noise", with the floor head that decides it.

    A floor head "reaches the bar" at a revision when it counts as `head_class` at `threshold` under `rule` (the
    paper's per-class rule: its selectivity >= threshold). With `boot` (B bootstrap replicates of the probe batch;
    re-measurement of one trained model, not training noise), over every floor head and every revision of the panel
    (`looks` = floor heads x revisions), with tail = (1 - level) / 2 = 2.5%:
    - fails: the same floor head, at the same revision, reaches the bar in at least 1 - tail = 97.5% of the
      resamples (`share_head` >= 97.5%). A head that reaches it only in some resamples while another does in others
      does not make the floor fail;
    - holds: in at least 97.5% of the resamples no floor head reaches the bar at any revision (`share_any`, the share
      of resamples in which some floor head does somewhere, <= 2.5%). This is a simultaneous band over all `looks`:
      `floor_upper`, the 97.5% quantile (inverted CDF) of the per-resample maximum over the floor heads and
      revisions, lies below the bar exactly when the floor holds;
    - within noise: neither; the data cannot tell holding from failing.
    The deciding head: the floor head (and revision) with the largest `share_head`, ties broken by the larger value
    (fails, within noise), or the floor head with the largest value (holds). Monte Carlo error: a 97.5% rule decided
    on B resamples has the binomial standard error `mc_se` = sqrt(tail (1 - tail) / B) at its cut (1.1 points at
    B = 200); `mc_close` is True when the share that decides the verdict (share_head for fails, share_any for
    holds, the nearer of the two for within noise) lies within two such errors of its cut: more resamples could
    change the verdict. Without `boot` (the published tier has no per-sequence data) the verdict is the paper's --
    holds iff no floor head reaches the bar -- and the interval and shares are NaN.
    `seq_len` (the context length T the panel was probed at; one for all, or per panel) gives `bar_mass`, the mass on
    position 0 the bar means at that T (`bar_mass`), to read beside the deciding head's own `mass`.
    Columns: panel, runs, looks, verdict, revision, tokens_b, name, value, value_lo, value_hi (the deciding head's
    own 95% re-measurement interval), mass (its mean attention mass on position 0, where the table has
    `mass_first_token`), seq_len, bar_mass, share_head, share_any, floor_upper, n_boot, mc_se, mc_close,
    n_floor_max, bootstrapped, statement (all of it in a sentence, for the pages)."""
    rows = _panel_verdicts(dev, layers=layers, head_class=head_class, threshold=threshold, rule=rule, boot=boot,
                           level=level)
    out = pd.DataFrame(rows, columns=["panel", "runs", "looks", "verdict", "revision", "tokens_b", "name", "value",
                                      "value_lo", "value_hi", "mass", "share_head", "share_any", "floor_upper",
                                      "n_boot", "mc_se", "mc_close", "n_floor_max", "bootstrapped"])
    lengths = seq_len if isinstance(seq_len, Mapping) else {p: seq_len for p in out["panel"]}
    out.insert(11, "seq_len", [lengths.get(p) for p in out["panel"]])
    out.insert(12, "bar_mass", [bar_mass(threshold, t) if t else np.nan for t in out["seq_len"]])
    out["statement"] = [_statement(r, level) for r in out.to_dict("records")]
    return out


def _panel_verdicts(dev: pd.DataFrame, *, layers: Sequence[int], head_class: str, threshold: float,
                    rule: CountingRule, boot: pd.DataFrame | None, level: float) -> list[dict]:
    """`floor_verdict`'s rows, one per panel: the verdict, its deciding floor head and (with `boot`) the shares
    that decide it."""
    col = sel_column(check_head_class(head_class))
    floor = floor_check(dev, layers=layers, head_class=head_class, threshold=threshold, rule=rule)
    ix = index(dev)
    in_floor = np.isin(dev["layer"].to_numpy(), list(layers))
    value = dev[col].to_numpy(dtype=float)
    point = np.where(head_mask(dev, head_class, threshold=np.finfo(float).tiny, rule=rule), value, 0.0)
    reps = uncertainty.Replicates.align(dev, boot) if boot is not None else None
    lo, hi = reps.head_interval(col, level=level) if reps is not None else (np.full(len(dev), np.nan),) * 2
    scores = _replicate_scores(reps, head_class, rule) if reps is not None else None  # (B, rows)
    mass = dev["mass_first_token"].to_numpy(dtype=float) if "mass_first_token" in dev.columns else \
        np.full(len(dev), np.nan)
    tail = (1 - level) / 2
    panel_of = np.asarray(ix.cols["panel"])[ix.codes]
    rows = []
    for panel, g in floor.groupby("panel", sort=False):
        here = np.flatnonzero((panel_of == panel) & in_floor)
        row = {"panel": panel, "runs": len(g), "looks": len(here), "n_floor_max": int(g["n_floor"].max()),
               "share_head": np.nan, "share_any": np.nan, "floor_upper": np.nan, "n_boot": 0, "mc_se": np.nan,
               "mc_close": False, "bootstrapped": reps is not None and panel in reps.panels}
        if not len(here):  # no floor layer in this panel: nothing can break the floor
            rows.append({**row, "verdict": "holds"})
            continue
        if row["bootstrapped"]:
            verdict, i, shares = _bootstrap_verdict(scores[:, here], point[here], here, threshold, tail)
            row.update(shares)
        else:
            i = here[np.argmax(point[here])]
            verdict = "holds" if bool(g["holds"].all()) else "fails"
        rows.append({**row, "verdict": verdict, "revision": dev["revision"].iloc[i],
                     "tokens_b": float(dev["tokens_b"].iloc[i]),
                     "name": head_name(dev["layer"].iloc[i], dev["head"].iloc[i]), "value": value[i],
                     "value_lo": lo[i], "value_hi": hi[i], "mass": mass[i]})
    return rows


def _bootstrap_verdict(scores: np.ndarray, point: np.ndarray, here: np.ndarray, threshold: float,
                       tail: float) -> tuple[str, int, dict]:
    """One panel's verdict from the bootstrap (`floor_verdict`'s rule): `scores` (B, looks) the floor heads'
    replicate scores, `point` their point values, `here` their rows in the table. Returns (verdict, the deciding
    row, the share_head / share_any / n_boot / mc_se / floor_upper / mc_close fields)."""
    reach = scores >= threshold  # (B, looks)
    n_boot = reach.shape[0]
    allowed = int(np.floor(tail * n_boot + 1e-9))  # resamples that may disagree: 5 of 200
    k_head, k_any = reach.sum(axis=0), int(reach.any(axis=1).sum())
    best = np.lexsort((point, k_head))[-1]  # largest share, then largest value
    se = float(np.sqrt(tail * (1 - tail) / n_boot))
    if k_head[best] >= n_boot - allowed:
        verdict, i, gap = "fails", here[best], k_head[best] / n_boot - (1 - tail)
    elif k_any <= allowed:
        verdict, i, gap = "holds", here[np.argmax(point)], tail - k_any / n_boot
    else:
        verdict, i = "within noise", here[best]
        gap = min((1 - tail) - k_head[best] / n_boot, k_any / n_boot - tail)
    top = np.sort(scores.max(axis=1))  # the per-resample maximum over all looks, sorted
    return verdict, i, dict(share_head=float(k_head[here == i][0] / n_boot), share_any=k_any / n_boot,
                            n_boot=n_boot, mc_se=se, floor_upper=float(top[n_boot - allowed - 1]),
                            mc_close=bool(gap <= 2 * se))


def _statement(r: dict, level: float) -> str:
    """One verdict as a sentence: the deciding head, its interval, the shares that decide, its attention mass."""
    if pd.isna(r["value"]):
        return f"{r['verdict']}: no head in the floor layers"
    text = f"{r['verdict']}: {r['name']} at {r['revision']} reads {r['value']:.1f}×"
    if r["bootstrapped"]:
        text += f" ({level:.0%} re-measurement interval {r['value_lo']:.1f}×–{r['value_hi']:.1f}×); "
        if r["verdict"] == "holds":
            text += (f"no floor head reaches the bar at any of the {r['looks']} looks in {1 - r['share_any']:.1%} of "
                     f"{r['n_boot']} resamples")
        else:
            text += f"it reaches the bar in {r['share_head']:.1%} of {r['n_boot']} resamples"
            if r["verdict"] != "fails":
                text += f", some floor head at some of the {r['looks']} looks in {r['share_any']:.1%}"
        if r["mc_close"]:
            text += ", within two Monte Carlo standard errors of the cut"
    if pd.notna(r["mass"]):
        text += f"; mass on position 0 {r['mass']:.2f}"
        if pd.notna(r["bar_mass"]):
            text += f" (the bar: {r['bar_mass']:.2f} at T = {r['seq_len']:.0f})"
    return text


def _replicate_scores(reps: uncertainty.Replicates, head_class: str, rule: CountingRule) -> np.ndarray:
    """(B, rows): each head's `head_class` selectivity on every replicate, 0 where the rule does not let it count
    at any bar (best-class: its best class on that replicate is another), so "reaches the bar" is score >= bar."""
    scores = reps.values[sel_column(head_class)].copy()
    if rule != "per-class":
        for b, frame in enumerate(reps.frames()):
            scores[b] = np.where(head_mask(frame, head_class, threshold=np.finfo(float).tiny, rule=rule),
                                 scores[b], 0.0)
    return scores


# ------------------------------------------------------------------------------------ F1 as a robustness claim
def _floor_over_bars(dev: pd.DataFrame, taus: Sequence[float], rule: CountingRule) -> list[dict]:
    rows = []
    for tau in taus:
        most = floor_check(dev, threshold=tau, rule=rule).groupby("panel", sort=False)["n_floor"].max()
        for panel, n in [*most.items(), (ALL, most.max())]:
            rows.append(claim_row(panel, "L0+L1", "first_token", tau, rule, n, n == 0, "exact", BOS_THRESHOLD,
                                  "per-class"))
    return rows


def _floor_hangs_on(dev: pd.DataFrame, rule: CountingRule) -> list[dict]:
    """The strongest first-token head in layers 0/1 at any revision: the floor fails for bars at or below it."""
    rows = []
    for panel, g in floor_margin(dev).groupby("panel", sort=False):
        r = g.loc[g["value"].idxmax()]
        rows.append(hangs_on_row(panel, "L0+L1", "first_token", BOS_THRESHOLD, r["name"], r["revision"],
                                 r["tokens_b"], r["value"], stays_from=r["value"], stays_to=np.inf, text=(
                                     f"the strongest first-token head in layers 0/1, {r['name']} at "
                                     f"{tokens_text(r['tokens_b'])}, reads {r['value']:.3g}× "
                                     f"({r['value'] / BOS_THRESHOLD:.0%} of the {BOS_THRESHOLD:g}× bar): the floor "
                                     f"fails for bars at or below {r['value']:.3g}×")))
    return rows


FLOOR_CLAIM = RobustClaim(
    "F1.floor", "F1", "no head in layers 0/1 reaches the first-token bar at any revision",
    "most first-token heads in layers 0/1 at any revision", COUNTING_RULES, _floor_over_bars, _floor_hangs_on,
    unit=lambda v: f"{v:g} heads", axis=("first-token heads in layers 0/1 (most at any revision)", "symlog", None), kind="count")

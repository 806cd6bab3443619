"""The model appendix's ablations, computed and read: the final-revision group ablation with the circuit's own
controls (records tiers) or the authors' rows labelled with the head set each was drawn for (published tier), the
greater-than task of the authors' files, the ablation over training, and the sentences the page glues.

Every ablation table has one row per condition (ABLATION_TABLE_COLUMNS): which heads were zeroed, in words
(`label`), which head set a control was drawn for (`drawn_for`), and top-1 at the query with its 95% Wilson interval
on the batch's n sequences (`analysis.uncertainty.binomial_intervals`). The circuit's own controls are
`measure.ablation.circuit_conditions`' (the rows `circuitdev ablate` prints): matched random groups (the circuit's
layers and per-layer counts, heads outside it; distinct groups, one per seed from 123 on) and random groups of as
many heads from any layer outside it; a layer the circuit fills has no head to draw, and the row says so instead of
ablating nothing.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.schema import INDUCTION_THRESHOLD, MATCHED_RANDOM_SEED

ABLATION_TABLE_COLUMNS = ["condition", "label", "drawn_for", "seed", "n_ablated", "heads", "n", "acc_top1",
                          "acc_top1_lo", "acc_top1_hi", "acc_top5", "loss", "mean_logit_B", "note"]
# The authors' condition names in words (their files name conditions, not head sets).
_AUTHORS_WORDS = [(r"^baseline$", "no ablation"),
                  (r"^ablate_induction_screen_>=(\d+)x.*$", r"induction circuit (screen ≥ \1×)"),
                  (r"^ablate_top(\d+)_by_integral$", r"spectral top-\1 (highest PR integral)"),
                  (r"^ablate_top(\d+)_gt_heads$", r"top-\1 greater-than heads"),
                  (r"^ablate_matched_random_same_layers.*$", "matched random set"),
                  (r"^ablate_full_spec_layers.*$", "whole layers (upper bound)"),
                  (r"^ablate_(L\d+H\d+)_only.*$", r"\1 alone"),
                  (r"^ablate_induction_circuit.*$", "“induction circuit” of the file"),
                  (r"^ablate_prev_token_circuit.*$", "“previous-token circuit” of the file")]


def in_words(label: str) -> str:
    """An authors' condition name in words: "ablate_top6_by_integral" -> "spectral top-6 (highest PR integral)"."""
    import re

    for pattern, words in _AUTHORS_WORDS:
        if re.match(pattern, label):
            return re.sub(pattern, words, label)
    return label.removeprefix("ablate_").replace("_", " ")


# ---------------------------------------------------------------------------------------------------- ablations


def final_ablation(panel, table: pd.DataFrame, *, config: dict | None = None, threshold: float = INDUCTION_THRESHOLD,
                   groups: int = 5, seed: int = MATCHED_RANDOM_SEED, mode: str = "zero",
                   batch_size: int | None = None, device: str | None = None,
                   results_dir=None) -> tuple[pd.DataFrame | None, str]:
    """Zero- (or mean-) ablate the final-revision induction circuit (sel_induction >= threshold in `table`, the
    panel's developmental table) on the records' own batch (`config`: their ProbeConfig fields), beside its own
    controls: `sources.run.ablate_final_circuit`, the conditions `circuitdev ablate` prints (up to `groups`
    distinct matched random groups, as many random groups from any layer outside the circuit -- not neutral: they
    can hold previous-token heads -- and the circuit's whole layers). One checkpoint load: cheap for toy and folder
    panels, a GPU job for the 1B models. With `results_dir`: the rows `circuitdev ablate --over-training` stored
    for the final revision when they are these (`sources.ablate.read_final_ablation`: the same conditions from the
    same batch), without loading anything. Returns (ABLATION_TABLE_COLUMNS, "") or (None, why)."""
    from circuitdev.analysis.uncertainty import binomial_intervals
    from circuitdev.sources.run import ablate_final_circuit

    out = _stored_final(panel, results_dir, threshold=threshold, groups=groups, mode=mode, seed=seed)
    why = ""
    if out is None:
        out, why = ablate_final_circuit(panel, table, config=config, threshold=threshold, groups=groups, seed=seed,
                                        mode=mode, batch_size=batch_size, device=device)
    if out is None:
        return None, why
    return binomial_intervals(out.reindex(columns=ABLATION_TABLE_COLUMNS), "acc_top1", "n"), ""


def _stored_final(panel, results_dir, **asked) -> pd.DataFrame | None:
    """The final revision's stored conditions (`read_final_ablation`) of the panel's records, or None."""
    if results_dir is None or panel is None:
        return None
    from circuitdev.sources.ablate import read_final_ablation
    from circuitdev.sources.records import PanelRecords

    read = PanelRecords(results_dir, panel.name, panel).read(on_missing="skip")
    return read_final_ablation(results_dir, read, **asked) if len(read.table) else None


def published_ablation(published, model: str, *, task: str = "induction") -> pd.DataFrame:
    """The authors' ablation of one model and task (`authors_ablation`) as ABLATION_TABLE_COLUMNS: conditions in
    words, each control labelled with the head set it was drawn for, top-1 with its Wilson interval on the file's
    n_examples."""
    from circuitdev.analysis.uncertainty import binomial_intervals
    from circuitdev.sources.published_ablations import authors_ablation

    ab = authors_ablation(published.ablation, model, task=task)
    metric = "acc_top1" if task == "induction" else "top1_above"
    ab = ab.assign(label=ab["label"].map(in_words), drawn_for=ab["drawn_for"].map(lambda d: in_words(d) if d else ""),
                   n=ab["n_examples"], note="", acc_top1=ab.get(metric))
    ab["seed"] = ab["seed"].astype("Int64")
    return binomial_intervals(_by_head_set(ab), "acc_top1", "n").reindex(columns=ABLATION_TABLE_COLUMNS)


def _by_head_set(ab: pd.DataFrame) -> pd.DataFrame:
    """Rows in reading order: no ablation, the circuit and its controls, then each other head set followed by the
    controls drawn for it (controls of no identified set last)."""
    sets = [label for label, drawn in zip(ab["label"], ab["drawn_for"]) if not drawn and label != "no ablation"]
    sets.sort(key=lambda label: 0 if label.startswith("induction circuit") else 1)
    rank = {label: 2 * i + 1 for i, label in enumerate(sets)}
    key = [0 if label == "no ablation" else rank[label] if not drawn else rank.get(drawn, len(ab) * 2) + 1
           for label, drawn in zip(ab["label"], ab["drawn_for"])]
    return ab.iloc[sorted(range(len(ab)), key=lambda i: key[i])].reset_index(drop=True)


def greater_than(published, model: str) -> pd.DataFrame:
    """The authors' greater-than ablation of one model (`reanalysis.greater_than_table`: top1_above with its Wilson
    interval on the file's n_examples) with conditions in words, and `circuit_of`: for a row whose heads are
    exactly a published model's final induction circuit (>= 50x) or previous-token circuit (>= 100x, best class)
    in the authors' per-revision files, whose circuit it is ("" for none)."""
    from circuitdev.analysis import findings
    from circuitdev.analysis.reanalysis import greater_than_table
    from circuitdev.schema import PREV_TOKEN_THRESHOLD

    gt = greater_than_table(published)
    gt = gt[gt["model"] == model].reset_index(drop=True)
    owners: dict[frozenset, list[str]] = {}
    for panel, t in published.table.groupby("panel", sort=False):
        for kind, c in (("induction", findings.final_circuit(t, threshold=INDUCTION_THRESHOLD)),
                        ("previous-token", findings.final_circuit(t, head_class="previous-token",
                                                                  threshold=PREV_TOKEN_THRESHOLD, rule="best-class"))):
            owners.setdefault(frozenset(c["name"]), []).append(f"{panel}'s {kind} circuit")
    return gt.assign(label=gt["label"].map(in_words), drawn_for=gt["drawn_for"].map(lambda d: in_words(d) if d else ""),
                     circuit_of=[" and ".join(owners.get(frozenset(str(h).split()), [])) if h else ""
                                 for h in gt["heads"]])


def greater_than_summary(gt: pd.DataFrame) -> pd.DataFrame:
    """`greater_than`'s table for reading: key columns first, top-1 above with its 95% interval as text, the
    probabilities as percentages, column names in words."""
    from circuitdev.book.display import fmt_interval, fmt_pct

    return pd.DataFrame({
        "heads zeroed": gt["label"], "drawn for": gt["drawn_for"].replace("", "—"), "heads": gt["n_ablated"],
        "top-1 is a later year (95% interval)": [fmt_interval(v, lo, hi, _pct) for v, lo, hi in
                                                 zip(gt["top1_above"], gt["top1_above_lo"], gt["top1_above_hi"])],
        "P(later year)": gt["prob_above"].map(fmt_pct), "P(earlier year)": gt["prob_below"].map(fmt_pct),
        "logit difference": gt["logit_diff_above_below"],
        "whose circuit": gt["circuit_of"].replace("", "—"),
        "heads the model lacks": gt["heads_outside_model"], "which heads": gt["heads"].map(short_heads)})


def greater_than_text(gt: pd.DataFrame, model: str, *, heads_per_layer: int) -> str:
    """What the authors' greater-than ablation of `model` shows, in sentences (`greater_than`'s table)."""
    from circuitdev.book.display import fmt_interval

    top = lambda r: fmt_interval(r["top1_above"], r["top1_above_lo"], r["top1_above_hi"], _pct)  # noqa: E731
    rows = {r["label"]: r for r in gt.to_dict("records")}
    base = next((r for r in rows.values() if r["condition"] == "baseline"), None)
    out = [f"On the file's {int(gt['n_examples'].iloc[0])} prompts (its n_examples, the denominator of every "
           "interval here), the top-1 next token is a year above the start year for "
           f"{top(base) if base else 'an unrecorded share'} of them with nothing ablated."]
    for r in rows.values():
        if r["condition"] == "baseline":
            continue
        what = f"zeroing the {r['label']}" + (f" drawn for the {r['drawn_for']}" if r["drawn_for"] else "")
        what += f" ({r['n_ablated']} heads)"
        sentence = f"{what[0].upper()}{what[1:]} gives {top(r)}"
        if "of the file" in r["label"]:
            sentence += (f"; these heads ({r['heads']}) are {r['circuit_of']}" if r["circuit_of"] else
                         f"; these heads ({r['heads']}) are no published model's circuit in the authors' files")
            if r["circuit_of"] and model not in r["circuit_of"]:
                sentence += f", not {model}'s"
            if r["heads_outside_model"]:
                sentence += (f", and {int(r['heads_outside_model'])} of them do not exist in {model} (it has "
                             f"{heads_per_layer} heads per layer): zeroing them changes nothing")
        out.append(sentence + ".")
    return " ".join(out)


def short_heads(heads: str, *, most: int = 12) -> str:
    """A head list for a table cell: as is up to `most` heads, else its first and last heads with the count."""
    names = str(heads or "").split()
    if len(names) <= most:
        return " ".join(names) or "—"
    layers = len({n.split("H")[0] for n in names})
    return f"{' '.join(names[:4])} … {' '.join(names[-2:])} ({len(names)} heads in {layers} layers)"


def _pct(value) -> str:
    """A top-1 as a percentage: two decimals below 10% (the authors' 0.25%), one above."""
    from circuitdev.book.display import fmt_pct, is_missing

    return fmt_pct(value, 2 if not is_missing(value) and abs(float(value)) < 0.1 else 1)


def _top1(row) -> str:
    from circuitdev.book.display import fmt_interval

    return fmt_interval(row["acc_top1"], row["acc_top1_lo"], row["acc_top1_hi"], _pct)


def ablation_summary(ab: pd.DataFrame) -> pd.DataFrame:
    """The ablation table for reading: one row per condition, key columns first (what was zeroed, which set a
    control belongs to, how many heads, top-1 with its 95% interval); random groups as their mean, its interval
    over the groups (`sources.ablate.control_interval`: the spread between groups, which a Wilson interval on the
    mean count would hide), with the range over the groups and their seeds."""
    from circuitdev.analysis.uncertainty import binomial_intervals
    from circuitdev.sources.ablate import control_interval

    rows = []
    for (cond, label, drawn_for), g in ab.groupby(["condition", "label", "drawn_for"], sort=False, dropna=False):
        done = g[g["acc_top1"].notna()]
        n = g["n"].iloc[0]
        mean = binomial_intervals(pd.DataFrame({"acc_top1": [done["acc_top1"].mean()], "n": [n]}),
                                  "acc_top1", "n").iloc[0] if len(done) else None
        if len(done) > 1:  # the mean of random groups: its interval over the groups
            lo, hi = control_interval((done["acc_top1"].to_numpy(dtype=float) * n).round(), int(n), None)
            mean = mean.copy()
            mean["acc_top1_lo"], mean["acc_top1_hi"] = lo, hi
        if len(g) > 1:
            seeds = g["seed"].dropna().astype(int)
            which = (f"{len(g)} distinct groups (seeds {seeds.min()}–{seeds.max()}); top-1 from "
                     f"{_pct(done['acc_top1'].min())} to {_pct(done['acc_top1'].max())}")
        else:
            which = short_heads(g["heads"].iloc[0])
        rows.append({"heads zeroed": label, "drawn for": drawn_for or "—", "heads": int(g["n_ablated"].iloc[0]),
                     "top-1 at the query (95% interval)": _top1(mean) if mean is not None else
                     "no such control" if g["note"].fillna("").str.startswith("not possible").any() else "not run",
                     "loss of B": done["loss"].mean() if len(done) else None, "which heads": which,
                     "note": "; ".join(dict.fromkeys(n for n in g["note"].fillna("") if n)) or "—"})
    return pd.DataFrame(rows)


def ablation_text(ab: pd.DataFrame, *, prev_heads: Sequence[str] = (), paper_control: float | None = None) -> str:
    """What the final-revision ablation shows, in sentences computed from `ab` (ABLATION_TABLE_COLUMNS): the
    circuit against no ablation, then the controls -- the circuit's own (records), or the head set the authors'
    controls were drawn for (published, with the paper's `paper_control` for the circuit when given).
    `prev_heads`: the previous-token circuit's heads, to say whether any-layer random groups hold some."""
    first = lambda cond: ab[ab["condition"] == cond].iloc[0] if (ab["condition"] == cond).any() else None  # noqa
    base, circ = first("baseline"), first("screen")
    if circ is None:
        return "The ablation table holds no induction-circuit condition."
    out = [f"With the induction circuit ({circ['n_ablated']} heads: {circ['heads']}) zeroed, top-1 at the query is "
           f"{_top1(circ)}" + (f", against {_top1(base)} with nothing ablated." if base is not None else ".")]
    own = ab[ab["drawn_for"] == circ["label"]]
    random, anywhere = own[own["condition"] == "matched_random"], own[own["condition"] == "random_any"]
    if len(random) and random["acc_top1"].isna().all():
        out.append(f"No matched random control (same layers and counts) exists for this circuit: "
                   f"{random['note'].iloc[0].removeprefix('not possible: ')}, so there is no head to draw.")
    elif len(random):
        gaps = random["note"].iloc[0]
        out.append(f"Its matched random control{_groups(random)}." +
                   (f" It cannot match the circuit everywhere: {gaps}." if gaps else ""))
    if len(anywhere):
        holding = [h for h in anywhere["heads"] if set(h.split()) & set(prev_heads)]
        out.append(f"The second control, random heads drawn outside the circuit from any layer{_groups(anywhere)}. "
                   f"It is not a neutral control: a group can hold heads the circuit relies on ({len(holding)} of its "
                   f"{len(anywhere)} groups hold a head of the previous-token circuit)")
        out[-1] += f", and its groups range from {_pct(anywhere['acc_top1'].min())} to " \
                   f"{_pct(anywhere['acc_top1'].max())}." if len(anywhere) > 1 else "."
    others = ab[ab["condition"].isin(["matched_random", "upper_bound"]) & (ab["drawn_for"] != circ["label"])]
    if len(others) and not len(own):
        sets = ", ".join(dict.fromkeys(others["drawn_for"].replace("", "an unidentified head set")))
        out.append(f"The authors' files hold no control drawn for this circuit: their "
                   f"{' and '.join(others['label'])} rows were drawn for the {sets}, not for the circuit, and are "
                   "shown under that set.")
        if paper_control is not None:
            out.append(f"The paper reports a matched random control for the circuit itself "
                       f"({paper_control:.2f}% top-1), which these files do not hold.")
    return " ".join(out)


def _groups(g: pd.DataFrame) -> str:
    """" (G distinct groups of k heads, seeds a–b) leaves X (95% interval ...) on average, from y to z by group"."""
    summary = ablation_summary(g).iloc[0]
    seeds = g["seed"].dropna().astype(int)
    heads = f"{summary['heads']} head{'s' * bool(summary['heads'] != 1)}"
    if len(g) == 1:
        return f" ({heads}: {g['heads'].iloc[0]}) leaves " + summary["top-1 at the query (95% interval)"]
    return (f" ({len(g)} distinct groups of {heads}, seeds {seeds.min()}–{seeds.max()}) leaves "
            f"{summary['top-1 at the query (95% interval)']} on average")


def necessity(over: pd.DataFrame, recall: pd.DataFrame) -> dict:
    """When the final circuit becomes necessary -- the first revision whose EXCESS drop's 95% interval lies above 0
    (excess_drop: the circuit's top-1 drop minus the random control groups' mean drop, `sources.ablate`; a drop
    against no ablation alone only says what zeroing it costs) -- and whether it is at the revisions where the
    screen finds it: F4's recall of the final circuit (`findings.circuit_recall`), first > 0 (one head at the
    threshold) and first = 1 (all). `over`: `ModelPage.over_training`."""
    need = over["excess_drop_lo"].to_numpy(dtype=float) > 0 if "excess_drop_lo" in over else np.zeros(len(over), bool)
    at = lambda i: over.iloc[int(i)]  # noqa: E731
    first = int(need.argmax()) if need.any() else None
    out = {"necessary": None if first is None else at(first), "stays": bool(first is not None and need[first:].all()),
           "n_necessary": int(need.sum()), "n_revisions": len(over)}
    for key, hit in (("first_head", recall["recall"] > 0), ("whole", recall["recall"] >= 1 - 1e-9)):
        found = recall[hit.fillna(False)]
        row = over[over["revision"] == found["revision"].iloc[0]] if len(found) else over.iloc[:0]
        out[key] = (found["revision"].iloc[0], row.iloc[0] if len(row) else None) if len(found) else None
    return out


def necessity_text(nec: dict, *, threshold: float) -> str:
    """`necessity` in sentences: "necessary" against the random groups (the excess drop), "costs" against no
    ablation."""
    from circuitdev.book.display import fmt_tokens_b

    points = lambda r: (f"{100 * r['excess_drop']:.1f} points beyond the random groups' drop, 95% interval "  # noqa: E731
                        f"{100 * r['excess_drop_lo']:.1f} to {100 * r['excess_drop_hi']:.1f}; zeroing it costs "
                        f"{100 * r['top1_drop']:.1f} points of top-1")
    first = nec["necessary"]
    if first is None:
        out = [f"At none of the {nec['n_revisions']} revisions does zeroing the final circuit lower top-1 by more "
               "than zeroing random groups of as many heads, beyond the noise (no excess-drop interval lies above "
               "0): the circuit is never shown necessary."]
    else:
        out = [f"The circuit becomes necessary at {first['revision']} ({fmt_tokens_b(first['tokens_b'])} tokens), "
               f"the first revision whose drop in top-1 beyond the random groups' lies above 0 ({points(first)})"
               + (", and stays necessary at every later revision." if nec["stays"] else
                  f"; it is necessary at {nec['n_necessary']} of the {nec['n_revisions']} revisions.")]
    for key, what in (("first_head", f"one of its heads at ≥ {threshold:g}×"),
                      ("whole", f"all of its heads at ≥ {threshold:g}×")):
        if nec[key] is None:
            out.append(f"The screen never finds {what}.")
            continue
        revision, row = nec[key]
        state = ("it is not in the ablation table" if row is None else
                 f"the circuit is {'already' if row['excess_drop_lo'] > 0 else 'not yet'} necessary there "
                 f"({points(row)})")
        out.append(f"The screen first finds {what} at {revision} (F4's recall); {state}.")
    return " ".join(out)

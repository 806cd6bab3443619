# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Three measures of an attention sink
#
# **Why compare.** The paper calls a head a sink (a first-token or BOS head) when the query at the second A puts
# {glue:text}`sink-bos-threshold` more attention on position 0 than on its baseline positions. That query always
# has something to copy, so a head that parks on position 0 only when it has nothing to do — a "dormant" head —
# is invisible to it. Every record of our own probe also holds two measures over *all* queries: the all-query
# first-token score (the same ratio, averaged over every query from position {glue:text}`sink-allq-skip` on) and
# the all-query *mass* rule, the mean attention mass on position 0 over the same queries, a sink when above
# ε = {glue:text}`sink-epsilon` (the ε of {cite:t}`gu2025attention`). That rule is not Gu et al.'s sink rate, which
# each record also holds exactly (the last section): they average over every query, query 0 included, and threshold
# each sequence before averaging. The authors' files hold the first measure only, so the comparison is made on the
# toy and measured tiers; the published tier appears with its one measure.
#
# **What we compute** (`findings.sink_measures`): per head and revision which measures call it a sink
# (`sink_flags`), how many heads each flags (`measure_counts`), whether they pick the same heads
# (`measure_agreement`), at the same revision (`sink_onsets`), and in the same layers — F1's floor under each
# measure (`floor_by_measure`, `lowest_layers`).

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book import Source, chapter, drawn_models, plots
from circuitdev.book.behaviour import record_revision_tables

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# second-A first-token selectivity that makes a sink (the paper: 30x)
bos_threshold: float = 30.0  # in (0, inf)
# all-query first-token selectivity that makes a sink (the paper's bar, by default)
allq_threshold: float = 30.0  # in (0, inf)
# the sink rate's epsilon (Gu et al.'s): a sink puts more than this share of its attention on position 0
epsilon: float = 0.3  # in (0, 1)
# the layers F1 says never hold a sink
floor_layers: list[int] = [0, 1]  # in [0, inf)

# %% tags=["remove-input"]
ch = chapter("sink_measures", globals())
ch.glue("bos-threshold", bos_threshold, "{:g}×")
ch.glue("allq-threshold", allq_threshold, "{:g}×")
ch.glue("epsilon", epsilon, "{:g}")
configs = {p: c for t in ch.tiers.present for p, c in t.probe_configs.items()}
ch.glue("allq-skip", min((c.get("allq_skip", 4) for c in configs.values()), default=ch.paper.allq_skip))
flags = ch.apply(findings.sink_flags, bos_threshold=bos_threshold, allq_threshold=allq_threshold, epsilon=epsilon)
records = flags[flags["tier"] != "published"] if len(flags) else flags
names = {"second_a": "second-A", "all_query": "all-query", "mass": "all-query mass"}

# %% [markdown]
# ## How many heads each measure calls a sink
#
# {numref}`fig-sink-counts` counts the heads each measure flags at every revision. At the final revision the
# second-A measure flags {glue:text}`sink-final-second-a`, the all-query score {glue:text}`sink-final-all-query`
# and the all-query mass rule {glue:text}`sink-final-mass` (toy and measured panels).

# %% tags=["remove-input"]
counts = pd.concat([findings.measure_counts(g.drop(columns="tier")).assign(tier=tier)
                    for tier, g in flags.groupby("tier", sort=False)], ignore_index=True) if len(flags) else \
    pd.DataFrame(columns=["tier", "panel"])
counts = counts[["tier", *[c for c in counts.columns if c != "tier"]]]
last = counts.groupby(["tier", "panel"], sort=False).tail(1) if len(counts) else counts
last_records = last[last["tier"] != "published"] if len(last) else last
for m in findings.SINK_MEASURES:
    ch.glue_list(f"final-{m.replace('_', '-')}", last_records, f"n_{m}", "{} heads",
                 absent="n/a (no toy or measured records)")

# %% tags=["remove-input", "full-width"]
ch.figure(plots.sink_counts(counts), name="fig-sink-counts",
          caption=f"Heads called a sink at each revision: second-A first-token selectivity ≥ {bos_threshold:g}× (the "
                  f"paper's, blue), all-query first-token selectivity ≥ {allq_threshold:g}× (orange), the all-query "
                  f"attention mass on position 0 > {epsilon:g} (green); one axis per model and tier (the published "
                  "tier has the first only).")

# %% [markdown]
# ## Do they pick the same heads?
#
# Over every (revision, head) of a panel, the Jaccard overlap of the heads two measures flag, and the heads each
# flags at some revision (the table below). Second-A against all-query:
# {glue:text}`sink-jaccard-second-a-all-query`; second-A against the mass rule:
# {glue:text}`sink-jaccard-second-a-mass`; all-query against the mass rule: {glue:text}`sink-jaccard-all-query-mass`. The three pick the same set of heads over
# the run in {glue:text}`sink-same-heads` of the {glue:text}`sink-panels` panels with records.

# %% tags=["remove-input"]
agreement = pd.concat([findings.measure_agreement(g.drop(columns="tier")).assign(tier=tier)
                       for tier, g in records.groupby("tier", sort=False)], ignore_index=True) if len(records) else \
    pd.DataFrame(columns=["tier", *findings.AGREEMENT_COLUMNS])
agreement = agreement[["tier", *findings.AGREEMENT_COLUMNS]]
for a, b in (("second_a", "all_query"), ("second_a", "mass"), ("all_query", "mass")):
    rows = agreement[(agreement["first"] == a) & (agreement["second"] == b)]
    ch.glue_list(f"jaccard-{a.replace('_', '-')}-{b.replace('_', '-')}",
                 rows.assign(text=[f"{j:.2f}" if pd.notna(j) else "none flagged" for j in rows["jaccard"]]), "text",
                 absent="n/a (no toy or measured records)")
same = agreement.groupby(["tier", "panel"])["same_heads"].all() if len(agreement) else pd.Series(dtype=bool)
ch.glue("same-heads", int(same.sum()) if len(same) else None)
ch.glue("panels", len(same) if len(same) else None)
shown = agreement.assign(first=agreement["first"].map(names), second=agreement["second"].map(names))
ch.table(shown, precision=2, caption="Agreement of two measures per panel, over every (revision, head): cells flagged "
                                     "by both, by one only, Jaccard; the heads each flags at some revision, those "
                                     "both flag, whether the sets are equal; the Jaccard overlap at the final "
                                     "revision.")

# %% [markdown]
# ## At the same revision?
#
# For every head some measure flags, the first revision each measure does ({numref}`fig-sink-timeline`). Of the
# {glue:text}`sink-onset-heads` heads more than one measure flags, the onset is the same revision under every
# measure that flags the head for {glue:text}`sink-onset-same` of them. Head by head: {glue:text}`sink-onset-list`.

# %% tags=["remove-input"]
onsets = pd.concat([findings.sink_onsets(g.drop(columns="tier")).assign(tier=tier)
                    for tier, g in records.groupby("tier", sort=False)], ignore_index=True) if len(records) else \
    pd.DataFrame(columns=["tier", "panel", "name"])
onset_cols = [f"onset_{m}" for m in findings.SINK_MEASURES]
if len(onsets):
    n_flagging = onsets[onset_cols].notna().sum(axis=1)
    multi = onsets[n_flagging > 1]
    same_onset = multi[[len(set(r.dropna())) == 1 for _, r in multi[onset_cols].iterrows()]]
    ch.glue("onset-heads", len(multi))
    ch.glue("onset-same", len(same_onset))
    ch.glue("onset-list", "; ".join(
        f"{r['panel']} {r['name']}: " + ", ".join(f"{names[m]} {r[f'onset_{m}']}" if pd.notna(r[f"onset_{m}"])
                                                  else f"{names[m]} never" for m in findings.SINK_MEASURES)
        for _, r in onsets.iterrows()) or None, absent="none")
else:
    for key in ("onset-heads", "onset-same", "onset-list"):
        ch.glue(key, None, absent="n/a (no toy or measured records)")

# %% tags=["remove-input", "full-width"]
ch.figure(plots.sink_timeline(records), name="fig-sink-timeline", tiers=["toy", "measured"],
          caption="One row per head some measure calls a sink; a marker at every revision a measure does (blue "
                  "circle: second-A selectivity; orange square: all-query selectivity; green triangle: the all-query "
                  "mass rule). Toy and measured panels.")

# %% tags=["remove-input"]
if len(onsets):
    ch.table(onsets[["tier", "panel", "name", *onset_cols]].rename(
        columns={f"onset_{m}": f"onset ({names[m]})" for m in findings.SINK_MEASURES}),
        caption="The first revision each measure calls the head a sink (empty: never).")

# %% [markdown]
# ## In the same layers? F1's floor under each measure
#
# F1 says layers {glue:text}`sink-floor-layers` never hold a sink. {numref}`fig-sink-floor` draws, per revision,
# the lowest layer holding a head each measure flags. Under the second-A measure the floor
# {glue:text}`sink-floor-second-a`; under the all-query score {glue:text}`sink-floor-all-query`; under the all-query
# mass rule {glue:text}`sink-floor-mass`. In the published tier (second-A only): {glue:text}`sink-floor-pub`.

# %% tags=["remove-input"]
ch.glue("floor-layers", " and ".join(map(str, floor_layers)))
floor = pd.concat([findings.floor_by_measure(g.drop(columns="tier"), layers=floor_layers).assign(tier=tier)
                   for tier, g in flags.groupby("tier", sort=False)], ignore_index=True) if len(flags) else \
    pd.DataFrame(columns=["tier", *findings.FLOOR_COLUMNS])
floor = findings.floor_texts(floor[["tier", *findings.FLOOR_COLUMNS]])
for m in findings.SINK_MEASURES:
    rows = floor[(floor["measure"] == m) & (floor["tier"] != "published")]
    ch.glue_list(f"floor-{m.replace('_', '-')}", rows, "text", sep="; ", absent="n/a (no toy or measured records)")
ch.glue_list("floor-pub", floor[floor["measure"] == "second_a"], "text", tier="published", sep="; ")
lowest = pd.concat([findings.lowest_layers(g.drop(columns="tier")).assign(tier=tier)
                    for tier, g in flags.groupby("tier", sort=False)], ignore_index=True) if len(flags) else \
    pd.DataFrame(columns=["tier", "panel"])

# %% tags=["remove-input", "full-width"]
ch.figure(plots.sink_floor(lowest, floor_layers=tuple(floor_layers)), name="fig-sink-floor",
          caption=f"The lowest layer holding a head each measure calls a sink, per revision (no marker: none); the "
                  f"shaded band is F1's floor (layers {', '.join(map(str, floor_layers))}); one axis per model and "
                  "tier.")

# %% tags=["remove-input"]
ch.table(floor.drop(columns="text").assign(measure=floor["measure"].map(names)),
         caption="F1's floor under each measure: heads it flags at some revision, the lowest layer among them, the "
                 "floor-layer heads it flags and the first revision one is, whether the floor holds.")

# %% [markdown]
# ## A large first-position activation?
#
# A mechanism for F1 that the paper does not measure but the literature suggests: {cite:t}`sun2024massive` find that
# large language models build, within their first few layers, a few activations at the first position (and at some
# delimiter tokens) that are orders of magnitude larger than any other ("massive activations"), and that attention to
# that position follows them. If F1 rests on it, a head can park its attention on position 0 only once the residual
# stream there holds such an activation, and the stream that layers 0 and 1 read has not built one yet. This is a
# hypothesis to set against the toy's own norms, not a finding: where the toy's first-position norm is no larger than
# the others' below its first sink layer, or already large where no sink forms, the data cut against it. Every record
# of our probe stores, per depth, the residual stream's norm at position 0 against its median over the other
# positions ({numref}`fig-sink-norms`; a line is thick where sink heads of the next layer read it). Toy panel —
# {glue:text}`sink-norms-toy`. Measured real
# panels — {glue:text}`sink-norms-measured`.
#
# Read this with one difference in mind: the toy is trained and probed with a BOS token at position 0, so its first
# position always holds the same token, whose embedding alone can mark it; the paper's induction batch starts with
# a random token, so a sink in the real models is a position-0 sink, not a BOS-token sink, and whatever marks the
# first position must be built from its position.

# %% tags=["remove-input", "full-width"]
revs = record_revision_tables(ch.tiers, ch.folders.results_dir)
norms = pd.concat([findings.position_norms(g.drop(columns="tier")).assign(tier=t) for t, g in
                   revs.groupby("tier", sort=False)], ignore_index=True) if len(revs) else pd.DataFrame()
said = pd.concat([findings.norm_summary(g.drop(columns="tier"), flags[flags["tier"] == t]).assign(tier=t) for t, g in
                  norms.groupby("tier", sort=False)], ignore_index=True) if len(norms) else pd.DataFrame()
for tier in ("toy", "measured"):
    rows = said[said["tier"] == tier] if len(said) else said
    ch.glue(f"norms-{tier}", "; ".join(f"in {p}, {t}" for p, t in zip(rows["panel"], rows["text"])) if len(rows)
            else None, absent="none in this build with first-position norms (records of format 3 or later carry them: "
            + ("make book" if tier == "toy" else "circuitdev probe --panel pythia-1b") + ")")
ch.figure(plots.first_position_norms(norms, records), name="fig-sink-norms", drawn=norms,
          caption="The residual stream's norm at position 0 over the median norm of the other positions, per depth "
                  "(the embeddings, then the output of each layer), over training; the dotted line is 1× (position 0 "
                  "like any other); a line is thick from the first revision a head of the layer reading it is a "
                  f"second-A sink (≥ {bos_threshold:g}×). Drawn: {drawn_models(norms)}; only our probe's records "
                  "store these norms.")

# %% [markdown]
# ## Why they differ
#
# A ratio and a mass are different bars, and how different depends on the context length: with a mass m on
# position 0 and the rest spread evenly over T − 1 positions, the selectivity is about m (T − 1) / (1 − m). So a
# 30× selectivity means a mass of {glue:text}`sink-mass-paper` at the paper's T = 256 but
# {glue:text}`sink-mass-toy` at the toy's T = {glue:text}`sink-toy-t`, close to the mass rule's ε: at the toy's length
# the all-query ratio and the mass ask for nearly the same thing, and the two disagree mainly through the ratio's
# baseline. The second-A measure sees one query per sequence, one that always has a match to copy; the other two
# see every query, including those with nothing to do.

# %% tags=["remove-input"]
toy_t = sorted({int(c.get("seq_len", 0)) for p, c in (ch.tiers["toy"].probe_configs.items()
                                                       if ch.tiers.get("toy") is not None else [])})
ch.glue("mass-paper", findings.mass_for_selectivity(bos_threshold, ch.paper.seq_len), "{:.2f}")
ch.glue("toy-t", ", ".join(map(str, toy_t)) or None, absent="n/a")
ch.glue("mass-toy", findings.mass_for_selectivity(bos_threshold, toy_t[0]) if toy_t else None, "{:.2f}", absent="n/a")

# %% [markdown]
# ## Gu et al.'s sink rate, exactly
#
# {cite:t}`gu2025attention` measure sinks as a *rate*: for each sequence, layer and head, the attention on the first
# token averaged over every query of the sequence — query 0, which can only attend to itself, included — is a sink
# when above ε = 0.3, and the indicator is averaged over sequences, layers and heads. Every record of format 5 holds
# each head's share of sequences over ε (`gu_sink_share`), and the revision table its mean over the heads
# (`gu_sink_rate`). It differs from the all-query mass rule above in three ways:
#
# - **query set**: every query, query 0 included (its mass on position 0 is 1, which lifts short sequences), where
#   the mass rule starts at query {glue:text}`sink-allq-skip`;
# - **threshold order**: each sequence is thresholded before the average over sequences, where the mass rule
#   averages over sequences first and asks the average for ε — a share of sequences, not a yes or no per head;
# - **input text**: Gu et al. used natural text, where our probe feeds the synthetic induction batch.
#
# {numref}`fig-sink-rates` draws both rates over training. At the final revision Gu et al.'s rate is
# {glue:text}`sink-gu-rate-final` and the share of heads over the mass rule {glue:text}`sink-mass-rate-final`
# (toy and measured panels).

# %% tags=["remove-input", "full-width"]
rates = ch.apply(findings.sink_rates, epsilon=epsilon)
rates = rates.assign(tokens=rates["tokens_b"] * 1e9) if len(rates) else rates.assign(tokens=[])  # the token axis
final_rates = rates.groupby(["tier", "panel"], sort=False).tail(1) if len(rates) else rates
final_rates = final_rates[final_rates["tier"] != "published"] if len(final_rates) else final_rates
ch.glue_list("gu-rate-final", final_rates, "gu_sink_rate", "{:.0%}", missing="not measured (a record older than "
             "format 5)", absent="n/a (no toy or measured records)")
ch.glue_list("mass-rate-final", final_rates, "mass_sink_rate", "{:.0%}", absent="n/a (no toy or measured records)")
drawn_rates = rates[rates[["gu_sink_rate", "mass_sink_rate"]].notna().any(axis=1)] if len(rates) else rates
ch.figure(plots.sink_rates(rates), name="fig-sink-rates", drawn=drawn_rates,
          caption="Gu et al.'s sink rate (the share of sequences in which a head's attention to position 0, averaged "
                  "over every query, exceeds 0.3, averaged over the heads; red) and the share of heads whose mean "
                  f"all-query mass on position 0 exceeds {epsilon:g} (green), per revision. Drawn: "
                  f"{drawn_models(drawn_rates)}.")

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
# # The toy panel, as measured in this build
#
# The toy recipe ({doc}`../toy_recipe`) says how the toy panel is trained and why. This page says what this build's
# run of it gave: how long each model trained, when each head type first appeared, which heads are there at the end
# and how close layers 0 and 1 come to the sink bar. The toy recipe and the introduction quote these numbers from
# here, so they are the ones of the machine and the seed that built this book; on another machine the training
# times differ, and with another seed the heads and the steps may too.
#
# **What we compute.** From each toy panel's `recipe.json` (written by `circuitdev toy train` beside the
# checkpoints): the recipe's hash, the training time and the final loss. From the probe records (refined revisions
# included): the first probed revision at which each event holds (`circuitdev.toy.report.first_events`), the heads
# above the bars at the last revision (`final_heads`) and the strongest layer-0/1 first-token selectivity over
# training (`strongest`), with its 95% bootstrap interval over the probe batch's sequences. An event that already
# holds at a panel's first probed revision is a bound ("≤"), one never reached is "not by" the last revision.

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book import Source, chapter, fmt_tokens, toy_page
from circuitdev.measure.positions import induction_ceiling
from circuitdev.toy import report, trials
from circuitdev.toy.recipe import PANEL_NAMES, PRESETS

# %% tags=["parameters", "remove-cell"]
# tiers to read: the toy panel, and the authors' files for the real models' sink onset
sources: list[Source] = ["toy", "published"]
# a head is an induction head at induction selectivity ≥ this (paper: 50x)
induction_threshold: float = 50.0  # in (0, inf)
# a head is a sink head at first-token selectivity ≥ this, at the second A or over all queries (paper: 30x)
sink_threshold: float = 30.0  # in (0, inf)
# a head is a previous-token head at previous-token selectivity ≥ this (the paper's class bar: 30x; F5 uses 100x)
prev_threshold: float = 30.0  # in (0, inf)

# %% tags=["remove-input"]
ch = chapter("toy_panel", globals(), what="this page")
toy, toy_dir, default, mini = ch.tiers.get("toy"), ch.folders.data_dir / "toy", PRESETS["default"], PRESETS["mini"]
replicas = [] if toy is None or toy.replicas is None else list(pd.unique(toy.replicas["panel"]))
panels = list(dict.fromkeys([*PANEL_NAMES.values(), *(toy.panels if toy else []), *replicas]))
runs = report.training_runs(toy_dir, panels)
events = ch.apply(report.first_events, report.toy_events(induction=induction_threshold, sink=sink_threshold,
                                                         prev=prev_threshold), tiers=["toy"], replicas=True)
induction = ch.apply(report.final_heads, "sel_induction", induction_threshold, tiers=["toy"], replicas=True)
sinks = ch.apply(report.final_sinks, sink_threshold, tiers=["toy"], replicas=True)
floor, floor_allq = (ch.apply(report.strongest, c, tiers=["toy"], replicas=True)
                     for c in ("sel_first_token", "sel_first_token_allq"))
texts = toy_page.panel_texts(panels, runs, events, induction, sinks, floor, floor_allq)
for panel, row in texts.iterrows():
    for key, text in row.items():
        ch.glue(f"{toy_page.short_name(panel)}-{key}", text)
families = list(PANEL_NAMES.values())
for key in ("seconds", "induction-first", "induction-final", "sinks-final", "sinks-final-names", "floor", "order"):
    ch.glue(f"{key}-list", toy_page.summary_list(texts, key, families))
for key in ("prev-first", "induction-first"):
    ch.glue(f"{key}-revisions", toy_page.revisions_list(events, key, families))
trained = runs[runs["trained"].astype(bool)]
ch.glue("recipe-hash", ", ".join(sorted(set(trained["recipe_hash"]))) or None,
        absent="none (no toy panel was trained in this build's data folder)")
ch.glue("default-hash", default.recipe_hash())
for key, value in (("induction", induction_threshold), ("sink", sink_threshold), ("prev", prev_threshold)):
    ch.glue(f"{key}-threshold", value, "{:g}×")
ch.glue("seconds-total", trained[trained["panel"].isin(families)]["seconds"].sum() / 60 if len(trained) else None,
        "{:.1f} min", absent="not recorded in this build")

# %% [markdown]
# ## The training runs
#
# This build trained its toy panels with recipe {glue:text}`toy-recipe-hash` (the defaults of
# `circuitdev.toy.ToyRecipe` hash to {glue:text}`toy-default-hash`). Training took {glue:text}`toy-seconds-list`,
# adding up to {glue:text}`toy-seconds-total` for the three families: wall-clock time on the machine that trained
# them, which a busy machine stretches. The corpus: {glue:text}`toy-corpus-tokens`. A default run sees
# {glue:text}`toy-default-tokens` tokens, a run of the workshop's `mini` preset {glue:text}`toy-mini-tokens`; the
# `mini` run in this build's data folder: {glue:text}`toy-mini-seconds`.

# %% tags=["remove-input"]
ch.glue("corpus-tokens", report.corpus_tokens(toy_dir, default.corpus_hash()),
        lambda n: f"{fmt_tokens(n)} tokens as this build tokenized it",
        absent="not generated in this build's data folder")
ch.glue("default-tokens", default.steps * default.tokens_per_step, fmt_tokens)
ch.glue("mini-tokens", mini.steps * mini.tokens_per_step, fmt_tokens)
ch.glue("phase-step", f"step {round(default.phases[0][0] * default.steps)}")
mini_run = report.training_runs(toy_dir, [mini.panel_name("gpt_neox")]).iloc[0]
ch.glue("mini-seconds", f"{mini_run['seconds']:.0f} s of training (panel {mini_run['panel']}, recipe "
        f"{mini_run['recipe_hash']})" if mini_run["trained"] else None,
        absent="none (session 2 of the workshop trains it and shows how long it took)")
if len(trained):
    ch.table(trained.drop(columns=["trained"]).assign(tokens=trained["tokens"].map(fmt_tokens)),
             formats={"seconds": "{:.0f}", "final_loss": "{:.3f}"}, caption="The toy panels of this build as trained: the recipe hash, the seed, the training length, the "
                     "wall-clock training time on the machine that trained them (seconds) and the final loss.")
else:
    ch.note("No toy panel of this build has a recipe.json in the data folder: train them with "
            "`circuitdev toy train` (`make book` does).")

# %% [markdown]
# ## When each head type first appeared
#
# The table below gives the first probed revision at which each event holds, per panel. In words, the first
# previous-token head (≥ {glue:text}`toy-prev-threshold`) appeared at {glue:text}`toy-prev-first-revisions` and the
# first induction head (≥ {glue:text}`toy-induction-threshold`) at {glue:text}`toy-induction-first-list`; the default
# recipe's second phase, which brings the repeat and backcopy windows, starts at {glue:text}`toy-phase-step`. Two
# of F3's milestones in each panel, three induction heads and sink heads (≥ {glue:text}`toy-sink-threshold`) in 10%
# of the heads — F3's earliest sink milestone, not the sink majority (50%) its gap is measured to, which the F3
# chapter gives as a bound — came in this order: {glue:text}`toy-order-list`.

# %% tags=["remove-input"]
if len(events) and "panel" in events.columns:
    grid = events.assign(text=[toy_page.event_text(r) for r in events.to_dict("records")]).pivot(
        index="event", columns="panel", values="text").reindex([e.name for e in report.toy_events()])
    grid = grid[[p for p in panels if p in grid.columns]]
    ch.table(grid.reset_index(), caption="The first probed revision at which each event holds (training tokens; the "
             "layers of the heads counted there). Bars: induction and previous-token as set on this page, sink heads "
             "at the second A or over all queries.")
else:
    ch.note("No toy records in this build: nothing to time.")

# %% [markdown]
# ## The heads at the end
#
# At the last revision: induction heads {glue:text}`toy-induction-final-list`; sink heads (either first-token score
# ≥ {glue:text}`toy-sink-threshold`, with the attention mass on position 0 beside each score)
# {glue:text}`toy-sinks-final-list`. The strongest first-token selectivity of a layer-0/1 head over all of training,
# at the second A with its 95% bootstrap interval: {glue:text}`toy-floor-list` — F1 ({doc}`f1_floor`) says whether
# that keeps the paper's floor.

# %% tags=["remove-input"]
ch.table(texts[["induction-final", "sinks-final", "floor", "floor-allq"]].rename_axis("panel").reset_index(),
         caption="The final induction and sink heads of each toy panel, and the strongest layer-0/1 first-token "
                 "selectivity over training (second A, with its 95% bootstrap interval; all queries, a point value: "
                 "the records keep no replicates of the all-query score).")

# %% [markdown]
# ## Seeds
#
# With seed replicas (the pipeline setting `toy_seeds`), the final number of induction heads per seed:
# {glue:text}`toy-seed-spread-induction`; of sink heads at the second A: {glue:text}`toy-seed-spread-sinks`.

# %% tags=["remove-input"]
for key, head_class in (("induction", "induction"), ("sinks", findings.BOS)):
    spread = ch.seed_spread(findings.head_counts, "n", fmt="{:.0f}", head_class=head_class,
                            threshold=induction_threshold if head_class == "induction" else sink_threshold)
    ch.glue(f"seed-spread-{key}", "; ".join(f"{p} {v}" for p, v in zip(spread["panel"], spread["values"])) or None,
            absent="no seed replicas in this build (its toy_seeds lists seed 0 only)")

# %% [markdown]
# ## The probe at toy scale, and the real models
#
# Under the paper's shared baseline, a head with all its attention on B scores at most
# {glue:text}`toy-ceiling-paper` at the paper's T = 256 but {glue:text}`toy-ceiling-toy` at the toy's context
# (`circuitdev.measure.positions.induction_ceiling`), which is why the toy panels screen with each sequence's A and
# B left out of the baseline. For comparison with the toy's sink onset, the real models reach sink heads in 10% of
# their heads (first-token ≥ {glue:text}`toy-sink-threshold`) at {glue:text}`toy-pub-sink-onsets`
# ({doc}`f3_milestones`).

# %% tags=["remove-input"]
ch.glue("ceiling-paper", induction_ceiling(ch.paper.seq_len), toy_page.fmt_x)
ch.glue("ceiling-toy", induction_ceiling(default.probe_seq_len), toy_page.fmt_x)
pub = ch.tiers.get("published")
ch.glue("pub-sink-onsets", toy_page.onsets_text(findings.milestones(pub.table, specs=[findings.milestone(
    "bos_10pct", threshold=sink_threshold)])) if pub is not None else None,
        absent="(the authors' files are not in this build)")

# %% [markdown]
# ## The recorded long trials
#
# The trials of the toy recipe at more training tokens (`data/toy_trials/`, recorded by `circuitdev toy trial`; not
# trained by this build) are shown and discussed on the toy recipe page ({doc}`../toy_recipe`, "Long trials"), which
# quotes this page's reading of them.

# %% tags=["remove-input"]
trial_counts, trial_meta = trials.read_trials()
toy_page.glue_trials(ch, trial_counts, trial_meta)

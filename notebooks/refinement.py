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
# # Exactly when: refining the revision grid
#
# **The question.** A panel probes a fixed grid of revisions, so an event — the first sink heads, the induction
# heads crossing {glue:text}`refinement-paper-induction-threshold` — is only known to happen somewhere between two
# of them. Where the grid is coarse, so is every milestone of {doc}`f3_milestones`.
#
# **What we do.** `circuitdev refine --panel P --metric M --max-new K` (`circuitdev.sources.refine`) finds the
# adjacent pair of probed revisions across which a per-revision metric M changes most, probes the available
# checkpoint nearest their midpoint in log tokens, and repeats inside that window until K new revisions are probed
# or no checkpoint is left between a changing pair. The new records are stored like any other, so every page of
# this book includes them. The toy trainer keeps a dense grid of checkpoints for this ({doc}`../toy_recipe`);
# the pipeline runs the refinements listed under `refine:` in its configuration ({doc}`../rerun`).

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book import Source, chapter, fmt_tokens_b, plots

# %% tags=["parameters", "remove-cell"]
# tiers to read the panel from: toy, measured
sources: list[Source] = ["toy", "measured"]
# the refined panel (a record panel: refine it with `circuitdev refine --panel P`)
panel: str = "toy-pythia"
# the per-revision metrics it was refined on (names of findings.REVISION_METRICS)
metrics: list[str] = ["bos_fraction", "induction_3_heads"]

# %% tags=["remove-input"]
ch = chapter("refinement", globals())
view = ch.panel_view(panel)
ch.glue("panel", panel)
ch.glue("added", None if view is None else len(view.refined), absent="no")
if view is not None and len(view.refined):
    ch.table(view.refined.assign(tokens=view.refined["tokens"].map(lambda t: fmt_tokens_b(t / 1e9)),
                                 metric=view.refined["metric"].map(plots.metric_label)),
             caption=f"Revisions `circuitdev refine` added to {panel}: between which probed revisions, on which "
                     "metric, and the change across that pair when it was chosen.", formats={"change": "{:.3g}"})
elif view is None:
    ch.note(f"No records of `{panel}` in this build: probe it (`circuitdev probe --panel {panel}`) and refine it.")

# %% [markdown]
# ## The refined trajectories
#
# {glue:text}`refinement-added` revisions were added to {glue:text}`refinement-panel`. Each figure below shows a
# metric on the refined grid (line, with its 95% bootstrap band over the probe batch's sequences) beside the default
# grid of the panel file (dashed), over all of training and zoomed on the event; the shading marks the event's
# window on the default grid (light) and after refinement (dark).

# %% tags=["remove-input", "full-width"]
windows = [findings.window_comparison(view.table, view.grid, m) for m in metrics] if view is not None else []
for m, w in zip(metrics, windows):
    vals = findings.revision_metric(view.table, m, boot=view.boot).assign(refined=lambda d: ~d["revision"].isin(view.grid))
    pct, what = 100 if m == "bos_fraction" else 1, findings.REVISION_METRICS[m][0]
    ch.figure(plots.refined_trajectory(vals, vals[~vals["refined"]], value="value", scale=pct,
                                       ylabel=plots.metric_label(m, axis=True),
                                       title=f"{panel}: {plots.metric_label(m)}, on the refined grid",
                                       window=(w["grid_from_tokens_b"], w["grid_to_tokens_b"]),
                                       refined_window=(w["refined_from_tokens_b"], w["refined_to_tokens_b"])),
              name=f"fig-refinement-{m.replace('_', '-')}", tiers=[view.tier],
              caption=f"{what[:1].upper()}{what[1:]} of {panel} at every probed revision; red diamonds: added by "
                      "refinement; " + ("a yes / no milestone, drawn as steps" if vals["value"].dropna().isin([0, 1]).all()
                                        else "band: 95% bootstrap interval") + "; dashed: the default grid.")

# %% [markdown]
# ## How much narrower
#
# The window of each event — from the last revision before the change to the first after it — on the default grid
# and after refinement: {glue:text}`refinement-event-windows`. For the milestones of {doc}`f3_milestones`, whose
# windows also carry the bootstrap's noise (from the revision before the earliest first revision of the resamples
# to the latest): {glue:text}`refinement-milestone-windows`.

# %% tags=["remove-input"]
events = pd.DataFrame(windows)
ch.glue("event-windows", "; ".join(
    f"{plots.metric_label(r.metric)}: {r.grid_from_revision} → {r.grid_to_revision} ({fmt_tokens_b(r.grid_width_tokens_b)} tokens) became "
    f"{r.refined_from_revision} → {r.refined_to_revision} ({fmt_tokens_b(r.refined_width_tokens_b)}), "
    f"{r.narrowing:.3g}× narrower" for r in events.itertuples()) or None, absent="none (no refined panel)")
ms = findings.milestone_window_comparison(view.table, view.grid, boot=view.boot) if view is not None else pd.DataFrame()
ch.glue("milestone-windows", "; ".join(
    f"{findings.milestone(r.milestone).describe()}: {r.grid_window} ({fmt_tokens_b(r.grid_width_tokens_b)} tokens) "
    f"became {r.refined_window} ({fmt_tokens_b(r.refined_width_tokens_b)}), {r.narrowing:.3g}× narrower"
    for r in ms.itertuples()) or None,
    absent="none reached")
tokens = lambda col: col.map(fmt_tokens_b)  # noqa: E731  (tokens_b -> "128k")
if len(events):
    ch.table(pd.DataFrame({
        "metric": events["metric"].map(plots.metric_label), "change": events["change"],
        "default grid": events["grid_from_revision"] + " → " + events["grid_to_revision"],
        "width": tokens(events["grid_width_tokens_b"]),
        "refined": events["refined_from_revision"] + " → " + events["refined_to_revision"],
        "width after": tokens(events["refined_width_tokens_b"]), "narrower": events["narrowing"].map("{:.3g}×".format),
        "added": events["added"]}), formats={"change": "{:.3g}"},
        caption="The window of each event (widths in training tokens) on the default grid and after refinement.")
if len(ms):
    ch.table(ms.assign(milestone=ms["milestone"].map(lambda m: findings.milestone(m).describe()),
                       grid_width_tokens_b=tokens(ms["grid_width_tokens_b"]),
                       refined_width_tokens_b=tokens(ms["refined_width_tokens_b"]),
                       narrowing=ms["narrowing"].map("{:.3g}×".format))
               .rename(columns={"grid_width_tokens_b": "width", "refined_width_tokens_b": "width after",
                                "narrowing": "narrower"}),
             caption="F3 milestone windows (bootstrap included; widths in training tokens) on the default grid and "
                     "after refinement.")

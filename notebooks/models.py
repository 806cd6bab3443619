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
# # Per-model appendices
#
# One appendix per model panel follows: the per-revision screen, the circuit heads, their PR trajectories and the
# group ablation against controls drawn for the circuit; for a model trained or probed here, the ablation at every
# revision; for a published model, the authors' greater-than ablation. This page lists what this build had, with a
# link to each appendix: {glue:text}`models-summary`

# %% tags=["remove-cell"]
from circuitdev.analysis.devtable import panel_summary
from circuitdev.book import chapter, fmt_tokens_b

# %% tags=["parameters", "remove-cell"]

# %% tags=["remove-input"]
ch = chapter("models", globals(), tiers=["published", "toy", "measured"], what="the appendices")
available = ch.apply(panel_summary)
ch.glue("summary", "; ".join(f"{len(g)} {tier} panel{'s' if len(g) > 1 else ''} ({', '.join(g['panel'])})"
                             for tier, g in available.groupby("tier", sort=False)) + "." if len(available) else None,
        absent="no data at all (see the notes below).")
if len(available):
    ch.table(available.assign(
        panel=[f'<a href="model-{p}.html">{p}</a>' for p in available["panel"]],
        configuration=[ch.tiers[t].configs.get(p, "?") for t, p in zip(available["tier"], available["panel"])])[
        ["panel", "tier", "revisions", "first_tokens_b", "last_tokens_b", "heads", "configuration"]].rename(
        columns={"panel": "appendix", "first_tokens_b": "first revision (tokens)",
                 "last_tokens_b": "last revision (tokens)"}),
        formats={"first revision (tokens)": fmt_tokens_b, "last revision (tokens)": fmt_tokens_b},
        caption=f"Panels with data in this build, each with its appendix (training tokens of the first and last "
                f"revision). {ch.tiers.provenance()}")

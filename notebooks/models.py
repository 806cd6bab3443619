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
# One appendix per model panel follows (see the table of contents): the per-revision screen, the circuit heads,
# their PR trajectories and the group ablation. This page lists what this build had: {glue:text}`models-summary`

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb

_before = set(globals())

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
# probe records (None: data/results of the repository)
results_dir: Optional[str] = None
# authors' files (auto: ../shared/published if it exists; None: none)
published_dir: Optional[str] = "auto"
# data folder holding panels/ (None: the repository's data/)
data_dir: Optional[str] = None
# record panels of this build (None: every panel with records)
panels: Optional[list[str]] = None

# %% tags=["remove-cell"]
nb.check_notebook_parameters(globals(), _before)

# %% tags=["hide-input"]
import pandas as pd

from circuitdev import findings

tiers, glue = nb.open_chapter("models", ["published", "toy", "measured"], data_dir=data_dir,
                              published_dir=published_dir, results_dir=results_dir, panels=panels,
                              what="the appendices")
rows = []
for t in tiers.present:
    revs = findings.revisions(t.table)
    for panel, g in revs.groupby("panel", sort=False):
        rows.append({"tier": t.name, "panel": panel, "revisions": len(g), "first": nb.fmt_tokens(g["tokens_b"].min()),
                     "last": nb.fmt_tokens(g["tokens_b"].max()), "heads": int(g["n_heads"].iloc[0]),
                     "configuration": t.configs.get(panel, "?")})
available = pd.DataFrame(rows, columns=["tier", "panel", "revisions", "first", "last", "heads", "configuration"])
glue("summary", "; ".join(f"{len(g)} {tier} panel{'s' if len(g) > 1 else ''} ({', '.join(g['panel'])})"
                          for tier, g in available.groupby("tier", sort=False)) + "." if len(available) else None,
     absent="no data at all (see the notes below).")
if len(available):
    nb.show_table(available, caption="Panels with data in this build (training tokens of the first and last "
                                     f"revision). {tiers.provenance()}")

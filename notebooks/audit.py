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
# # The audit · The paper against its own data
#
# Every numeric claim of the paper (and of its repository's notes) is listed once in `data/claims.yaml` with where
# it is stated. `circuitdev.audit.run_audit` re-derives each from the authors' published files with the findings
# functions and compares at the precision the paper writes. A claim the files cannot decide (no such revision, no
# null draws, no definition) is listed separately with the reason, never counted as a match or a mismatch.
#
# Of {glue:text}`audit-total` claims, {glue:text}`audit-match` match the authors' files,
# {glue:text}`audit-differs` differ and {glue:text}`audit-unverified` cannot be decided from them.

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb

_before = set(globals())

# %% [markdown]
# ## Parameters
#
# `claims_file` replaces the claims list (to audit another version of the paper); `findings_shown` restricts the
# tables to some findings.

# %% tags=["parameters"]
# a claims YAML file (None: data/claims.yaml)
claims_file: Optional[str] = None
# e.g. [F2, F4] (None: every finding)
findings_shown: Optional[list[str]] = None
# probe records (not used: the audit reads the published tier)
results_dir: Optional[str] = None
# authors' files (auto: ../shared/published if it exists; None: none)
published_dir: Optional[str] = "auto"
# data folder holding panels/ (None: the repository's data/)
data_dir: Optional[str] = None
# set by the pipeline for every notebook; not used on this page
panels: Optional[list[str]] = None

# %% tags=["remove-cell"]
nb.check_notebook_parameters(globals(), _before)

# %% tags=["hide-input"]
import pandas as pd

from circuitdev import plots
from circuitdev.audit import CLAIMS_PATH, run_audit

tiers, glue = nb.open_chapter("audit", ["published"], data_dir=data_dir, published_dir=published_dir,
                              results_dir=None, panels=None, what="the audit")
pub = tiers.get("published")
if pub is not None:
    result = run_audit(pub.table, claims=claims_file or CLAIMS_PATH, published=pub.published)
    table = pd.concat([result.table, result.unverified.assign(status="unverified")], ignore_index=True)
    if findings_shown:
        table = table[table["finding"].isin(findings_shown)]
    summary = result.summary
else:
    table = pd.DataFrame(columns=["finding", "id", "claim", "paper_value", "data_value", "status", "reason"])
    summary = {}
for key in ("claims", "match", "differs", "unverified"):
    glue("total" if key == "claims" else key, summary.get(key), absent="n/a")

# %% [markdown]
# ## At a glance
#
# {numref}`fig-audit-status` counts, per finding, the claims the authors' data match, contradict or cannot decide.

# %% tags=["hide-input"]
nb.show_figure(plots.audit_status(table), name="fig-audit-status", width="80%",
               caption="Numeric claims of the paper per finding: matched by the authors' published files (green), "
                       "contradicted (red), or not decidable from them (grey).", provenance=tiers.provenance())

# %% [markdown]
# ## Where the paper and its data differ
#
# Each row gives the data's value and, for claims that depend on a threshold, the thresholds at which the paper's
# number would be reproduced — often the sign of a different rule than the one stated.

# %% tags=["hide-input"]
if len(table):
    nb.show_table(table[table["status"] == "differs"][["finding", "claim", "paper_value", "data_value", "reason"]],
                  caption="Claims the published data contradict.")

# %% [markdown]
# ## Claims the published files cannot decide

# %% tags=["hide-input"]
if len(table):
    nb.show_table(table[table["status"] == "unverified"][["finding", "claim", "paper_value", "data_value",
                                                          "reason"]],
                  caption="Claims that need data the published folder lacks (null draws, other revisions) or a "
                          "definition the paper does not give.")

# %% [markdown]
# ## Every claim

# %% tags=["hide-input", "scroll-output"]
if len(table):
    nb.show_table(table[["finding", "claim", "paper_value", "data_value", "status", "reason"]],
                  caption=f"All claims and their status.")

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
# it is stated. `circuitdev.analysis.audit.run_audit` re-derives each from the authors' published files with the
# findings functions and compares at the precision the paper writes. A claim the files cannot decide (no such
# revision, no null draws, no definition) is listed separately with the reason, never counted as a match or a
# mismatch.
#
# Of {glue:text}`audit-total` claims, {glue:text}`audit-match` match the authors' files,
# {glue:text}`audit-differs` differ and {glue:text}`audit-unverified` cannot be decided from them.

# %% tags=["remove-cell"]
from circuitdev.analysis.audit import audit_table
from circuitdev.book import chapter, plots

# %% tags=["parameters", "remove-cell"]
# a claims YAML file (None: data/claims.yaml)
claims_file: str | None = None
# e.g. [F2, F4] (None: every finding)
findings_shown: list[str] | None = None

# %% tags=["remove-input"]
ch = chapter("audit", globals(), tiers=["published"], what="the audit")
pub = ch.tiers.get("published")
table, summary = audit_table(pub.table if pub else None, published=pub.published if pub else None,
                             claims=claims_file, findings=findings_shown)
for key, count in (("total", "claims"), ("match", "match"), ("differs", "differs"), ("unverified", "unverified")):
    ch.glue(key, summary.get(count))

# %% [markdown]
# ## At a glance
#
# {numref}`fig-audit-status` counts, per finding, the claims the authors' data match, contradict or cannot decide.

# %% tags=["remove-input"]
ch.figure(plots.audit_status(table), name="fig-audit-status", width="80%",
          caption="Numeric claims of the paper per finding: matched by the authors' published files (green), "
                  "contradicted (red), or not decidable from them (grey).")

# %% [markdown]
# ## Where the paper and its data differ
#
# Each row gives the data's value and, for claims that depend on a threshold, the thresholds at which the paper's
# number would be reproduced — often the sign of a different rule than the one stated.

# %% tags=["remove-input"]
shown = ["finding", "claim", "paper_value", "data_value", "reason"]
ch.table(table[table["status"] == "differs"][shown], caption="Claims the published data contradict.")

# %% [markdown]
# ## Claims the published files cannot decide

# %% tags=["remove-input"]
ch.table(table[table["status"] == "unverified"][shown],
         caption="Claims that need data the published folder lacks (null draws, other revisions) or a definition the "
                 "paper does not give.")

# %% [markdown]
# ## Every claim

# %% tags=["remove-input", "scroll-output"]
ch.table(table[["finding", "claim", "paper_value", "data_value", "status", "reason"]],
         caption="All claims and their status.")

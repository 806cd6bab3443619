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
# findings functions and compares it with the paper's number. **The rule**: {glue:text}`audit-rule`. A claim the
# files cannot decide (no such revision, no null draws, no definition, or a number the paper took from another run
# than these files) is listed separately with the reason, never counted as a match or a mismatch.
#
# **Bounds.** Where the files give a censored value — a milestone already reached at a model's first probed revision
# (at or before it, "≤"), one never reached (after the last, ">"), or a gap or recall entry built from one — the
# value is a bound, and a bound is never a plain match: the paper's number is **consistent (bound)** when it lies on
# the bound's side (the files cannot say more than that it is possible) and **differs (bound)** when the bound
# excludes it (a contradiction even without knowing the value).
#
# Of the {glue:text}`audit-findings-total` claims about the findings and the ablations,
# {glue:text}`audit-findings-match` match the authors' files, {glue:text}`audit-findings-differs` differ,
# {glue:text}`audit-findings-consistent-bound` are consistent with a bound, {glue:text}`audit-findings-differs-bound`
# are excluded by a bound and {glue:text}`audit-findings-unverified` cannot be decided from them. The other
# {glue:text}`audit-bookkeeping-total` claims are bookkeeping -- the panels' revision lists and token counts, the
# method's quoted settings and values: {glue:text}`audit-bookkeeping-match` match,
# {glue:text}`audit-bookkeeping-differs` differ (mostly revision labels the paper's tables give differently from the
# runs) and {glue:text}`audit-bookkeeping-unverified` cannot be decided. In all, {glue:text}`audit-match` of
# {glue:text}`audit-total` match, {glue:text}`audit-differs` differ, {glue:text}`audit-consistent-bound` are
# consistent with a bound and {glue:text}`audit-differs-bound` are excluded by one.

# %% tags=["remove-cell"]
from circuitdev.analysis.audit import audit_table
from circuitdev.analysis.claims import MATCH_RULE
from circuitdev.book import chapter, plots, tokens_b_text

# %% tags=["parameters", "remove-cell"]
# a claims YAML file (not set: data/claims.yaml)
claims_file: str | None = None
# e.g. [F2, F4] (not set: every finding)
findings_shown: list[str] | None = None

# %% tags=["remove-input"]
ch = chapter("audit", globals(), tiers=["published"], what="the audit")
pub = ch.tiers.get("published")
table, summary = audit_table(pub.table if pub else None, published=pub.published if pub else None,
                             claims=claims_file, findings=findings_shown)
ch.glue("rule", MATCH_RULE)
for prefix in ("", "findings-", "bookkeeping-"):
    for key, count in (("total", "claims"), ("match", "match"), ("differs", "differs"), ("unverified", "unverified"),
                       ("consistent-bound", "consistent_bound"), ("differs-bound", "differs_bound")):
        ch.glue(prefix + key, summary.get(prefix.replace("-", "_") + count))
f4 = table[(table["finding"] == "F4") & table["id"].str.startswith("F4.recall.")
           & table["status"].isin(["differs", "differs (bound)"])]
ch.glue("f4-recall-differs", "; ".join(
    f"{i.split('@')[0].removeprefix('F4.recall.')} at {i.split('@')[1]}% (paper {tokens_b_text(p)}, files "
    f"{tokens_b_text(d)})" for i, p, d in zip(f4["id"], f4["paper_value"], f4["data_value"])) or None, absent="none")
ch.glue("f4-recall-total", int(table["id"].str.startswith("F4.recall.").sum()) if len(table) else None)

# %% [markdown]
# ## At a glance
#
# {numref}`fig-audit-status` counts, per finding, the claims the authors' data match, contradict or cannot decide,
# with the claims decided by a bound apart (light shades).

# %% tags=["remove-input", "full-width"]
ch.figure(plots.audit_status(table), name="fig-audit-status",
          caption="Numeric claims of the paper per finding: matched by the authors' published files (green), "
                  "consistent with a bound they give (light green), excluded by a bound (light red), contradicted "
                  "(red), or not decidable from them (grey); the findings above, the bookkeeping claims (panels, "
                  "method settings) below.")

# %% [markdown]
# ## Where the paper and its data differ
#
# Each row gives the data's value and, for claims that depend on a threshold, the thresholds at which the paper's
# number would be reproduced — often the sign of a different rule than the one stated.

# %% tags=["remove-input"]
shown = ["finding", "claim", "paper_value", "data_value", "reason"]
ch.table(table[table["status"].isin(["differs", "differs (bound)"])][shown],
         caption="Claims the published data contradict (by a value, or by a bound that excludes the paper's).")

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

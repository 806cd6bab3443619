"""The claims file, the comparison rules, the audit on fixtures, and `circuitdev reanalyse` end to end."""

from __future__ import annotations

import textwrap

import pandas as pd
import pytest

from circuitdev import cli
from circuitdev.analysis.audit import run_audit
from circuitdev.analysis.claims import CLAIMS_PATH, Claim, compare
from circuitdev.analysis.quantities import QUANTITIES, load_claims
from circuitdev.errors import ConfigError
from circuitdev.sources.published import load_published
from circuitdev.analysis.reanalysis import CONTRACT_COLUMNS, reanalyse
from published_fixtures import published_fixture, real_published_dir  # noqa: F401  (pytest fixture)

HEADER = "claims:\n"


def claim_yaml(body: str) -> str:
    return HEADER + textwrap.indent(textwrap.dedent(body), "")


def write_claims(tmp_path, body: str):
    path = tmp_path / "claims.yaml"
    path.write_text(claim_yaml(body))
    return path


# ----------------------------------------------------------------------------------------------- the claims file


def test_the_claims_file_loads_and_uses_known_quantities():
    claims = load_claims(CLAIMS_PATH)
    assert len(claims) > 150 and len({c.id for c in claims}) == len(claims)
    assert {c.quantity for c in claims} <= set(QUANTITIES)
    assert {c.finding for c in claims} >= {"F1", "F2", "F3", "F4", "F5", "F6", "ablation"}


@pytest.mark.parametrize("body, message", [
    ("- {id: a, text: t, finding: F1, source: s, quantity: nonsense, paper: 1}", "field 'quantity'"),
    ("- {id: a, text: t, finding: F1, source: s, quantity: bos_count, panel: p, colour: red, paper: 1}",
     "unknown parameter(s) ['colour']"),
    ("- {id: a, text: t, finding: F1, source: s, quantity: bos_count, panel: p, series: {revision: [x, y], "
     "paper: [1]}}", "unequal length"),
    ("- {id: a, text: t, finding: F1, source: s, quantity: bos_count, panel: p}", "field 'paper' missing"),
    ("- {id: a, text: t, finding: F1, source: s, quantity: bos_count, paper: 1}", "needs parameter(s) ['panel']"),
    ("- {id: a, finding: F1, source: s, quantity: bos_count, panel: p, paper: 1}", "field 'text' missing"),
    ("- {id: a, text: t, finding: F1, source: s, quantity: n_revisions, panel: p, paper: 1}\n"
     "- {id: a, text: t, finding: F1, source: s, quantity: n_revisions, panel: q, paper: 1}", "duplicate claim id"),
])
def test_malformed_claims_name_the_claim_and_field(tmp_path, body, message):
    with pytest.raises(ConfigError) as err:
        load_claims(write_claims(tmp_path, body))
    assert message in str(err.value) and "claims[" in str(err.value)


# -------------------------------------------------------------------------------------------- comparison rules


def claim(paper, **kw) -> Claim:
    return Claim(id="c", text="t", finding="F", source="s", quantity=kw.pop("quantity", "bos_pct"), paper=paper, **kw)


def test_numbers_match_at_the_precision_the_paper_writes():
    assert compare(claim(10.9, decimals=1), 10.9375)
    assert not compare(claim(10.9, decimals=1), 10.96)
    assert compare(claim(6), 6.291) and not compare(claim(6), 6.6)  # "~6B"
    assert compare(claim(0.5), 0.536) and not compare(claim(0.5), 6.291)
    assert compare(claim(21), 20.95) and compare(claim(11.5), 11.478)
    assert compare(claim(4.40, decimals=2), 4.4) and not compare(claim(4.40, decimals=2), 4.25)
    assert compare(claim(9.75e7, significant=3), 97_539_000) and not compare(claim(9.75e7, significant=3), 97_600_000)


def test_a_bound_is_consistent_on_its_side_only():
    from circuitdev.analysis.claims import consistent_with_bound

    assert consistent_with_bound(claim(20), 20.0, "upper") and consistent_with_bound(claim(15), 20.0, "upper")
    assert not consistent_with_bound(claim(25), 20.0, "upper")
    assert consistent_with_bound(claim(21), 20.95, "lower") and consistent_with_bound(claim(30), 20.95, "lower")
    assert not consistent_with_bound(claim(19), 20.95, "lower") and consistent_with_bound(claim(19), 20.95, "none")


def test_the_rule_is_the_digits_the_paper_printed():
    """One value, two printings: 181.645 rounds to the paper's 181.6 but not to its 181.60 -- the rule the audit page
    states (MATCH_RULE). A tie at exactly half a unit matches whichever way the paper rounded."""
    from circuitdev.analysis.claims import MATCH_RULE

    assert compare(claim(181.6, decimals=1), 181.645) and not compare(claim(181.60, decimals=2), 181.645)
    assert compare(claim(181.60, decimals=2), 181.6049) and not compare(claim(181.60, decimals=2), 181.6051)
    assert compare(claim(0.25, decimals=1), 0.2) and compare(claim(0.3, decimals=1), 0.25)  # ties, both ways
    assert "181.6" in MATCH_RULE and "181.60" in MATCH_RULE


def test_a_value_from_another_run_cannot_be_decided(published_fixture, tmp_path):  # noqa: F811
    """A claim whose paper value comes from another run is never counted as a match or a mismatch: it goes to the
    claims the files cannot decide, with the files' value and whether it agrees."""
    data = load_published(published_fixture)
    body = """\
    - id: R.agree
      text: t
      finding: F2
      source: s
      quantity: bos_pct
      panel: pythia-1b
      revision: final
      other_run: a separate fp16 run
      paper: {agree}
    - id: R.differ
      text: t
      finding: F2
      source: s
      quantity: bos_pct
      panel: pythia-1b
      revision: final
      other_run: a separate fp16 run
      paper: 12.5
    - id: P.rev
      text: t
      finding: panel
      source: s
      quantity: n_revisions
      panel: pythia-1b
      paper: 99
    """
    final = run_audit(data.table, claims=write_claims(tmp_path, textwrap.dedent(body).format(agree=0)),
                      published=data, diagnose=False)
    value = float(final.unverified.set_index("id").loc["R.agree", "data_value"])
    path = write_claims(tmp_path, textwrap.dedent(body).format(agree=round(value, 4)))
    result = run_audit(data.table, claims=path, published=data, diagnose=False)
    assert set(result.unverified["id"]) == {"R.agree", "R.differ"} and list(result.table["id"]) == ["P.rev"]
    reasons = result.unverified.set_index("id")["reason"]
    assert "another run (a separate fp16 run)" in reasons["R.agree"] and "agrees with it" in reasons["R.agree"]
    assert "differs from it" in reasons["R.differ"]
    summary = result.summary  # the bookkeeping claim is counted apart from the findings
    assert (summary["findings_claims"], summary["findings_unverified"], summary["findings_differs"]) == (2, 2, 0)
    assert (summary["bookkeeping_claims"], summary["bookkeeping_differs"], summary["claims"]) == (1, 1, 3)


def test_never_lists_sets_and_strings():
    assert compare(claim("never"), "never") and not compare(claim("never"), 6.0)
    assert not compare(claim(6), "never")
    assert compare(claim([0, 4, 4]), [0, 4, 4]) and not compare(claim([0, 4, 4]), [0, 4, 3])
    assert not compare(claim([0, 4]), [0, 4, 4])
    heads = claim(["L7H1", "L4H4"], quantity="circuit_heads")
    assert compare(heads, ["L4H4", "L7H1"]) and not compare(heads, ["L4H4"])
    assert compare(claim("fp16"), "fp16") and not compare(claim("fp32"), "fp16")
    assert compare(claim(True), True) and not compare(claim(True), False)


# ------------------------------------------------------------------------------------------- audit on fixtures

FIXTURE_CLAIMS = """
- id: T.bos
  text: Pythia BOS fraction
  finding: F2
  source: test
  quantity: bos_pct
  panel: pythia-1b
  decimals: 1
  series:
    tokens_b: [6, 300]
    paper: [16.7, 33.3]
- id: T.recall
  text: Pythia 100% recall
  finding: F4
  source: test
  quantity: recall_tokens
  panel: pythia-1b
  level_pct: 100
  paper: 6.291
- id: T.never
  text: never 70%
  finding: F3
  source: test
  quantity: milestone_tokens
  panel: pythia-1b
  milestone: bos_70pct
  paper: never
- id: T.circuit
  text: final circuit
  finding: F4
  source: test
  quantity: circuit_heads
  panel: pythia-1b
  revision: final
  threshold: 50
  paper: [L2H3, L0H3, L1H2]
- id: T.layers
  text: per layer
  finding: F1
  source: test
  quantity: layer_counts
  panel: pythia-1b
  revision: step143000
  paper: [0, 4, 3]
- id: T.absent
  text: a revision the fixture lacks
  finding: F2
  source: test
  quantity: bos_count
  panel: pythia-1b
  revision: step38000
  paper: 59
- id: T.null
  text: null p99
  finding: F6
  source: test
  quantity: null_stat
  panel: pythia-1b
  stat: null_p99
  revision: final
  decimals: 2
  paper: 1.98
- id: T.ablation
  text: ablation
  finding: ablation
  source: test
  quantity: ablation_top1_pct
  decimals: 2
  series:
    key: [pythia-1b/baseline/0, pythia-1b/ablate_induction_screen/3, pythia-1b/ablate_matched_random/3]
    paper: [4.05, 0.30, 4.40]
- id: T.lead
  text: lead
  finding: F5
  source: test
  quantity: pr_lead_checkpoints
  head_class: induction
  paper: "1-2"
"""


def test_audit_on_the_fixture(published_fixture, tmp_path):  # noqa: F811
    data = load_published(published_fixture)
    result = run_audit(data.table, claims=write_claims(tmp_path, FIXTURE_CLAIMS), published=data)
    status = dict(zip(result.table["id"], result.table["status"]))
    assert status == {"T.bos@6": "match", "T.bos@300": "differs", "T.recall": "differs", "T.never": "match",
                      "T.circuit": "match", "T.layers": "differs", "T.ablation@pythia-1b/baseline/0": "match",
                      "T.ablation@pythia-1b/ablate_induction_screen/3": "differs"}
    reasons = dict(zip(result.table["id"], result.table["reason"]))
    # 8/12 heads at 30x; 4/12 = 33.3% for thresholds in (40, 60]
    assert "data give 66.6667" in reasons["T.bos@300"]
    assert "reproduced at thresholds 50–60× (of the grid" in reasons["T.bos@300"]
    # 100% recall already at step3000: every screen head passes there. Thresholds <= 40 keep L0H3 (49.99 at
    # step3000) in a screen it passes; 75-150 leave L2H3 alone (171.8 at step3000); 50-60 fail; 200+ is empty.
    assert "reproduced at thresholds 2–40×, 75–150× (of the grid" in reasons["T.recall"]
    assert "step143000: 3/3 heads (L0H3 L1H2 L2H3)" in reasons["T.recall"]
    assert set(result.unverified["id"]) == {"T.absent", "T.null", "T.ablation@pythia-1b/ablate_matched_random/3",
                                            "T.lead"}
    unverified = result.unverified.set_index("id")
    assert "step38000 is not in the pythia-1b data" in unverified.loc["T.absent", "reason"]
    assert "no null-selectivity draws" in unverified.loc["T.null", "reason"]
    assert "pythia-1b: median 1 (range 1 to 2, 3 heads)" in unverified.loc["T.lead", "data_value"]
    assert {k: v for k, v in result.summary.items() if "_" not in k} == {"claims": 12, "match": 4, "differs": 4,
                                                                         "unverified": 4}


def test_audit_checks_f6_when_null_draws_are_given(published_fixture, tmp_path):  # noqa: F811
    data = load_published(published_fixture)
    nulls = pd.DataFrame({"panel": ["pythia-1b"], "revision": ["step143000"], "tokens_b": [299.892],
                          "null_p99": [1.981], "null_max": [400.0], "real_max": [181.6], "k_above": [3]})
    result = run_audit(data.table, claims=write_claims(tmp_path, FIXTURE_CLAIMS), published=data, nulls=nulls)
    assert result.table.set_index("id").loc["T.null", "status"] == "match"


def test_the_paper_claims_run_on_any_source(published_fixture):  # noqa: F811
    """Without the published files' metadata, exactly the claims whose quantity reads it become unverified."""
    data = load_published(published_fixture)
    with_meta = run_audit(data.table, diagnose=False, published=data)
    without = run_audit(data.table, diagnose=False)
    metadata = {"ablation_top1_pct", "revision_meta_min", "trajectory_meta"}
    needs = {c.id for c in load_claims(CLAIMS_PATH) if c.quantity in metadata}
    lost = set(without.unverified["id"]) - set(with_meta.unverified["id"])
    assert lost and lost <= needs
    reasons = without.unverified.set_index("id").loc[sorted(lost), "reason"]
    assert reasons.str.contains("published files' metadata").all()
    # every other claim gets the same verdict from the table alone
    both = with_meta.table.merge(without.table, on="id", suffixes=("", "_alone"))
    assert len(both) == len(without.table) and (both["status"] == both["status_alone"]).all()


def test_reanalyse_cli_on_the_fixture_writes_the_contract(published_fixture, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    claims = write_claims(tmp_path, FIXTURE_CLAIMS)
    assert cli.main(["reanalyse", "--published", str(published_fixture), "--out", str(out),
                     "--claims", str(claims)]) == 0
    for name, columns in CONTRACT_COLUMNS.items():
        assert list(pd.read_csv(out / f"{name}.csv").columns) == columns
    milestones = pd.read_csv(out / "milestones.csv", keep_default_na=False)
    never = milestones[(milestones["model"] == "pythia-1b") & (milestones["milestone"] == "bos_70pct")]
    assert never["revision"].tolist() == [""] and never["tokens_b"].tolist() == [""]
    printed = capsys.readouterr().out
    assert "final BOS fraction: pythia-1b 66.7%" in printed and "12 claims: 4 match, 4 differ, 4 not" in printed
    assert pd.read_csv(out / "audit.csv")["status"].tolist().count("match") == 4
    assert len(pd.read_csv(out / "audit_unverified.csv")) == 4
    assert not list(out.glob("*.tmp"))
    # the authors' greater-than conditions with the Wilson interval of top-1 on the file's n_examples (500 here):
    # 495 of 500 -> centre (p + z^2/2n) / (1 + z^2/n), half-width z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)
    gt = pd.read_csv(out / "greater_than.csv")
    assert gt[["model", "label", "n_examples", "top1_above"]].values.tolist() == [["olmo-1b-0724", "baseline", 500,
                                                                                   0.99]]
    z, n, p = 1.959964, 500, 0.99
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (
        1 + z * z / n)
    assert gt[["top1_above_lo", "top1_above_hi"]].values.tolist()[0] == pytest.approx([centre - half, centre + half])


def test_reanalyse_cli_reports_bad_input(tmp_path, capsys):
    assert cli.main(["reanalyse", "--published", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- the real data


def test_reanalysis_of_the_published_data(tmp_path):
    tables = reanalyse(real_published_dir(), tmp_path)
    for name, columns in CONTRACT_COLUMNS.items():
        assert list(pd.read_csv(tmp_path / f"{name}.csv").columns) == columns
    bos = tables["bos_fraction"]
    assert bos["bos_fraction"].between(0, 1).all() and len(bos) == 30
    finals = bos.groupby("model", sort=False).tail(1)
    assert (100 * finals["bos_fraction"]).round(1).tolist() == [57.8, 80.9, 75.8]
    audit = tables["audit_detail"].set_index("id")
    # a censored value is compared as the bound it is, never a plain match (issue 29): OLMoE's gap and milestones
    assert set(audit["status"]) == {"match", "differs", "consistent (bound)"}
    assert audit.loc["F3.gap@olmoe-1b-7b-0924", "status"] == "consistent (bound)"
    assert audit.loc["F4.recall.olmoe-1b-7b-0924@33", "status"] == "consistent (bound)"
    assert "upper bound" in audit.loc["F3.olmoe-1b-7b-0924@induction_3_heads", "reason"]
    assert (audit.filter(like="F2.table", axis=0)["status"] == "match").all()
    assert (audit.filter(like="F5.L4H4", axis=0)["status"] == "match").all()
    assert audit.loc["F2.jump.olmo-1b-0724", "status"] == "match"
    # F4's 33% revisions do not survive the >= 50x rule (method reference §8.7): found by computation
    assert audit.loc["F4.recall.pythia-1b@33", "status"] == "differs"
    assert audit.loc["F4.recall.olmo-1b-0724@33", "status"] == "differs"
    assert audit.loc["F4.recall.pythia-1b@100", "status"] == "match"
    # greater-than: Pythia's top-5 heads take top-1 above from 99.6% to 31.0% of 500 prompts; the files'
    # "induction circuit" is OLMoE's, three of whose heads Pythia (8 heads per layer) does not have
    gt = pd.read_csv(tmp_path / "greater_than.csv").set_index(["model", "label"])
    assert len(gt) == 15 and (gt["n_examples"] == 500).all()
    top5 = gt.loc[("pythia-1b", "ablate_top5_gt_heads")]
    assert (top5["top1_above"], round(top5["top1_above_lo"], 3), round(top5["top1_above_hi"], 3)) == (0.31, 0.271,
                                                                                                      0.352)
    assert gt.loc[("pythia-1b", "ablate_induction_circuit (4h)"), "heads_outside_model"] == 3
    assert gt.loc[("pythia-1b", "ablate_matched_random_same_layers (5h)"), "drawn_for"] == "ablate_top5_gt_heads"
    gaps = tables["f3_gaps"].set_index("model")["token_ratio"]
    assert (round(gaps["olmo-1b-0724"], 1), round(gaps["olmoe-1b-7b-0924"])) == (11.5, 21)
    assert tables["f1_floor"]["holds"].all() and len(tables["f1_floor"]) == 30

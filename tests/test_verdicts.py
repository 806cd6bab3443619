"""What the data support (issue 29): the verdict rules in their order, F5's power (min_p, p_greater) against an
exact enumeration of its null, and `circuitdev reanalyse`'s verdicts.csv, spectral_topk_enrichment.csv and
f5_lead_null.csv against independent numpy computations on the authors' JSON."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.analysis.findings import f5_control as C
from circuitdev.analysis.reanalysis import reanalyse
from circuitdev.schema import HEAD_CLASSES, sel_column
from published_fixtures import real_published_dir

GRID = (20.0, 25.0, 30.0, 35.0, 40.0)


def cell(holds: dict[float, bool], *, claim="F1.floor", item="L0+L1", rule="per-class", paper_tau=30.0,
         values: dict[float, float] | None = None, censored: dict[float, bool] | None = None, panel="m",
         paper_rule="per-class") -> list[dict]:
    """Robustness rows of one claim cell over GRID under one rule."""
    return [{"claim": claim, "panel": panel, "item": item, "varied": "first_token", "threshold": t, "rule": rule,
             "value": (values or {}).get(t, 0.0 if holds[t] else 2.0), "holds": holds[t],
             "censored": (censored or {}).get(t, False),
             "bound": "upper" if (censored or {}).get(t, False) else "exact", "paper_threshold": paper_tau,
             "paper_rule": rule == paper_rule} for t in GRID]


def verdict_of(rows: list[dict], lead_null=None) -> dict:
    tests = C.lead_null_tests(lead_null) if lead_null is not None else None
    return F.claim_verdicts(pd.DataFrame(rows), tests).iloc[0].to_dict()


ALL_HOLD = dict.fromkeys(GRID, True)


def test_verdicts_follow_the_rules_in_order():
    best = cell(ALL_HOLD, rule="best-class")
    ok = verdict_of(cell(ALL_HOLD) + best)
    assert ok["verdict"] == "supported" and not ok["bound"] and "every rule variant" in ok["reason"]
    fails = verdict_of(cell({**ALL_HOLD, 30.0: False}) + best)
    assert fails["verdict"] == "not supported" and "the paper's 30×" in fails["reason"]
    near = verdict_of(cell({**ALL_HOLD, 35.0: False}) + best)
    assert near["verdict"] == "fragile" and "35×" in near["reason"]
    far = verdict_of(cell({**ALL_HOLD, 40.0: False}) + best)  # 10x away: not a neighbour
    assert far["verdict"] == "supported"
    censored = verdict_of(cell({**ALL_HOLD, 25.0: False}, censored={25.0: True}) + best)
    assert censored["verdict"] == "supported"  # a failing bound is no evidence against
    rule = verdict_of(cell(ALL_HOLD) + cell({**ALL_HOLD, 30.0: False}, rule="best-class"))
    assert rule["verdict"] == "fragile" and "best-class" in rule["reason"]
    bound = verdict_of(cell(ALL_HOLD, censored={30.0: True}) + best)
    assert bound["bound"] and bound["verdict"] == "supported" and "≤ " in bound["reason"]
    missing = verdict_of(cell(ALL_HOLD, values=dict.fromkeys(GRID, np.nan)))
    assert missing["verdict"] == "untestable" and "no value" in missing["reason"]


def test_f5_verdicts_read_the_null_test_and_its_power():
    rows = cell(ALL_HOLD, claim="F5.lead", item="induction", values=dict.fromkeys(GRID, 2.0))

    def null(p, min_p):
        return pd.DataFrame([{"model": "m", "head_class": "induction", "rule": "fraction-of-peak", "level": 0.5,
                              "p_value": p, "min_p": min_p}])

    assert list(C.lead_null_tests(null(0.4, 0.3)).columns) == F.TEST_COLUMNS
    weak = verdict_of(rows, null(0.4, 0.3))  # agrees in sign, but could never reject
    assert weak["verdict"] == "untestable" and "0.3" in weak["reason"]
    chance = verdict_of(rows, null(0.4, 0.01))  # could reject and does not
    assert chance["verdict"] == "not supported" and "p = 0.4" in chance["reason"] and "0.01" in chance["reason"]
    assert verdict_of(rows, null(0.01, 0.001))["verdict"] == "supported"
    wrong_sign = cell({**ALL_HOLD, 30.0: False}, claim="F5.lead", item="induction")
    assert verdict_of(wrong_sign, null(0.9, 0.3))["verdict"] == "not supported"  # fails first: rule 2 before 1b


def test_the_verdict_table_folds_items_per_model():
    cells = [("F3.milestones", "a", "x", "supported", False), ("F3.milestones", "a", "y", "fragile", True),
             ("F3.milestones", "b", "x", "supported", False), ("F1.floor", "all", "L0+L1", "fragile", False)]
    rows = pd.DataFrame([{"tier": "published", "claim": c, "panel": p, "item": i, "verdict": v, "bound": b,
                          "reason": ""} for c, p, i, v, b in cells])
    table = F.verdict_table(rows).set_index("claim")
    assert list(table.index) == ["F3.milestones"]  # the "all" row is no model
    assert table.loc["F3.milestones", "published · a"] == "1 fragile, 1 supported*"
    assert table.loc["F3.milestones", "published · b"] == "supported"
    assert table.loc["F3.milestones", "statement"] == F.ROBUSTNESS_CLAIMS["F3.milestones"].statement


def small_lead_table(at_init: bool = False) -> pd.DataFrame:
    """6 heads x 5 revisions; heads 0 and 1 form (induction >= 50) at revisions 3 and 4; every head's PR peaks at
    its own revision (head h elevated from revision e[h])."""
    elevation = [1, 2, 0, 3, 4, 1]
    formation = {0: 3, 1: 4}
    rows = []
    for r in range(5):
        for h in range(6):
            sel = {sel_column(c): 1.0 for c in HEAD_CLASSES}
            if h in formation and r >= formation[h]:
                sel["sel_induction"] = 60.0
            pr = 10.0 if r >= elevation[h] else 1.0
            rows.append({"panel": "m", "revision": f"step{r}", "tokens_b": (0.0 if at_init else 1e-3) + r * 1e-3,
                         "layer": 0, "head": h, **sel, "pr": pr})
    return pd.DataFrame(rows)


def exact_p(formation: np.ndarray, elevations: np.ndarray, n_rev: int, value: float) -> tuple[float, float]:
    """(P(median lead >= value), P(> value)) over every draw of len(formation) distinct heads (independent of the
    library)."""
    meds = []
    for draw in itertools.permutations(range(len(elevations)), len(formation)):
        leads = [f - elevations[h] if elevations[h] >= 0 else f - n_rev for f, h in zip(formation, draw)
                 if not (f == 0 and elevations[h] == 0)]
        if leads:
            meds.append(np.median(leads))
    meds = np.array(meds)
    return float((meds >= value).mean()), float((meds > value).mean())


def test_f5_power_against_an_exact_null():
    dev = small_lead_table()
    out = C.lead_null(dev, head_class="induction", n_perm=20_000, seed=1).iloc[0]
    elevations = np.array([1, 2, 0, 3, 4, 1])
    formation = np.array([3, 4])
    observed = np.median(formation - elevations[:2])  # 2 and 2
    p_ge, p_gt = exact_p(formation, elevations, 5, observed)
    assert out["median_lead"] == observed
    assert out["p_value"] == pytest.approx(p_ge, abs=0.01) and out["p_greater"] == pytest.approx(p_gt, abs=0.01)
    best = np.median(formation - elevations.min())  # every circuit head elevated at the earliest revision any is
    assert out["min_p"] == pytest.approx(exact_p(formation, elevations, 5, best)[0], abs=0.01)
    assert out["min_p"] <= out["p_value"] and out["p_greater"] <= out["p_value"]
    said = C.lead_null_texts(pd.DataFrame([out]))["power"].iloc[0]
    assert said.startswith("could reject") if out["min_p"] < 0.05 <= out["p_value"] else said
    weak = C.lead_null_texts(pd.DataFrame([{**out, "min_p": 0.3, "p_value": 0.4}]))["power"].iloc[0]
    assert weak == "cannot reject at 0.05 whatever the data (the best attainable p is 0.3)"


def test_a_toy_panels_step0_elevation_gives_no_lead():
    """At initialisation (0 tokens) nothing came before: an elevation there is no lead and no bound."""
    leads = F.pr_lead(small_lead_table(at_init=True), head_class="induction")
    assert set(leads["lead_censoring"]) == {"exact"}
    heads = F.pr_lead(small_lead_table(at_init=True).assign(pr=lambda d: np.where(d["head"] == 0, 10.0, d["pr"])),
                      head_class="induction").set_index("name")
    assert heads.loc["L0H0", "lead_censoring"] == "undefined" and pd.isna(heads.loc["L0H0", "lead_checkpoints"])
    after = F.pr_lead(small_lead_table(at_init=False).assign(pr=lambda d: np.where(d["head"] == 0, 10.0, d["pr"])),
                      head_class="induction").set_index("name")
    assert after.loc["L0H0", "lead_censoring"] == "lower"  # a first probed revision after initialisation: a bound


# ------------------------------------------------------------------------------- on the authors' files
@pytest.fixture(scope="module")
def real_tables(tmp_path_factory):
    path = real_published_dir()
    out = tmp_path_factory.mktemp("reanalysis")
    reanalyse(path, out)
    return path, out


def authors_files(path):
    for f in sorted((path / "per_revision").glob("*.json")):
        yield json.loads(f.read_text())


def log_comb(n, k):
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def test_spectral_enrichment_against_the_hypergeometric_on_the_authors_json(real_tables):
    path, out = real_tables
    got = pd.read_csv(out / "spectral_topk_enrichment.csv")
    assert list(got.columns) == ["panel", "revision", "class", "observed", "k", "base_count", "n_heads", "expected",
                                 "p_fewer", "p_more"]
    got = got.set_index(["revision", "class"])
    checked = 0
    for data in authors_files(path):
        tau, k = float(data["selectivity_threshold"]), int(data["top_k"])
        labels = []
        for scores in data["all_head_selectivity"].values():
            best = max(scores, key=scores.get)
            labels.append(best if scores[best] >= tau else "unclassified")
        n = len(labels)
        for cls, observed in data["class_breakdown_topK"].items():
            base = labels.count(cls)
            xs = np.arange(max(0, k - (n - base)), min(k, base) + 1)  # the support
            pmf = np.exp([log_comb(base, x) + log_comb(n - base, k - x) - log_comb(n, k) for x in xs])
            row = got.loc[(data["revision"], cls)]
            assert (row["observed"], row["base_count"], row["n_heads"], row["k"]) == (observed, base, n, k)
            assert row["expected"] == pytest.approx(k * base / n)
            assert row["p_fewer"] == pytest.approx(min(1, pmf[xs <= observed].sum()), rel=1e-6, abs=1e-12)
            assert row["p_more"] == pytest.approx(min(1, pmf[xs >= observed].sum()), rel=1e-6, abs=1e-12)
            checked += 1
    assert checked > 30


def test_f1_verdicts_against_the_authors_json(real_tables):
    """F1's verdict re-derived by hand from the files: the most first-token heads in layers 0/1 at any revision, at
    the paper's 30x and at its neighbours 25x / 35x."""
    path, out = real_tables
    verdicts = pd.read_csv(out / "verdicts.csv")
    assert list(verdicts.columns) == ["claim", "panel", "item", "verdict", "bound", "reason"]
    assert set(verdicts["verdict"]) <= set(F.VERDICTS)
    most: dict[tuple[str, float], int] = {}
    for data in authors_files(path):
        name = data["model"].lower()
        model = "olmoe-1b-7b-0924" if "olmoe" in name else "olmo-1b-0724" if "olmo" in name else "pythia-1b"
        for tau in (25.0, 30.0, 35.0):
            n = sum(s["first-token"] >= tau for name, s in data["all_head_selectivity"].items()
                    if int(name.split("_")[0][1:]) in (0, 1))
            most[model, tau] = max(most.get((model, tau), 0), n)
    f1 = verdicts[verdicts["claim"] == "F1.floor"].set_index("panel")
    for model in ("pythia-1b", "olmo-1b-0724", "olmoe-1b-7b-0924"):
        holds = most[model, 30.0] == 0
        near_fails = most[model, 25.0] > 0 or most[model, 35.0] > 0
        want = "not supported" if not holds else "fragile" if near_fails else "supported"
        assert f1.loc[model, "verdict"] == want, (model, most)


def test_f5_lead_null_has_its_power_columns(real_tables):
    _, out = real_tables
    null = pd.read_csv(out / "f5_lead_null.csv")
    assert {"p_value", "p_greater", "min_p"} <= set(null.columns)
    ok = null.dropna(subset=["p_value", "p_greater"])
    assert (ok["p_greater"] <= ok["p_value"] + 1e-12).all()
    assert ((null["min_p"] > 0) & (null["min_p"] <= 1)).all()

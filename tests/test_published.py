"""Loading, validating, fetching and checking published directories (synthetic fixtures + the real files)."""

from __future__ import annotations

import hashlib
import json
import urllib.error

import pytest

from circuitdev import cli
from circuitdev.errors import DataError
from circuitdev.sources.fetch import ManifestEntry, check_published, fetch_published, read_manifest
from circuitdev.sources.published import load_published
from circuitdev.sources.published_panels import PANELS, revision_tokens_b, tokens_b_for_step
from circuitdev.schema import DEV_REQUIRED_COLUMNS
from published_fixtures import published_fixture, real_published_dir  # noqa: F401  (pytest fixture)


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def pythia_file(root, revision="step3000"):
    return root / "per_revision" / f"pythia1b_mechinterp_{revision}.json"


# ------------------------------------------------------------------------------------------------------ the loader


def test_loads_the_developmental_table(published_fixture):  # noqa: F811
    data = load_published(published_fixture)
    table = data.table
    assert set(DEV_REQUIRED_COLUMNS) <= set(table.columns) and {"step", "pr", "source"} <= set(table.columns)
    assert list(table["panel"].unique()) == list(PANELS)
    assert (table["source"] == "published").all()
    assert len(table) == 5 * 12 + 4 * 8 + 3 * 4
    row = table[(table["panel"] == "pythia-1b") & (table["revision"] == "step3000")
                & (table["layer"] == 2) & (table["head"] == 3)].iloc[0]
    assert (row["step"], row["tokens_b"], row["sel_induction"], row["pr"]) == (3000, 6.291, 171.8, 48.05)
    olmo = table[table["panel"] == "olmo-1b-0724"]
    assert sorted(olmo["tokens_b"].unique()) == [2, 117, 264, 3048]  # from the labels
    assert table[table["panel"] == "olmoe-1b-7b-0924"]["pr"].isna().all()  # no trajectory file
    assert data.trajectories["panel"].tolist() == ["pythia-1b", "olmo-1b-0724"]
    assert data.revisions.loc[data.revisions["panel"] == "pythia-1b", "n_examples_valid"].tolist() == [2000] * 5


def test_ablation_files_become_a_tidy_table(published_fixture):  # noqa: F811
    ab = load_published(published_fixture).ablation
    screen = ab[(ab["condition"].str.startswith("ablate_induction_screen")) & (ab["metric"] == "acc_top1")]
    assert screen["heads"].tolist() == ["L0H3 L1H2 L2H3"] and screen["value"].tolist() == [0.0025]
    assert set(ab["task"]) == {"induction", "greater-than"}
    assert ab.loc[ab["task"] == "greater-than", "model"].unique().tolist() == ["olmo-1b-0724"]


def test_tokens_rules():
    assert revision_tokens_b("pythia-1b", "step143000") == 299.892  # 2,097,152 tok/step, truncated to 0.001
    assert revision_tokens_b("pythia-1b", "step1") == 0.002
    assert revision_tokens_b("olmo-1b-0724", "step1454000-tokens3048B") == 3048  # label, not 3049.3
    assert revision_tokens_b("olmoe-1b-7b-0924", "step100000-tokens419B") == 419  # floor(step x 4,194,304 / 1e9)
    assert tokens_b_for_step("olmoe-1b-7b-0924", 1220000) == 5117
    with pytest.raises(DataError, match="label says 418B"):
        revision_tokens_b("olmoe-1b-7b-0924", "step100000-tokens418B")
    with pytest.raises(DataError, match="no '-tokensTB' label"):
        revision_tokens_b("olmo-1b-0724", "step1000")
    with pytest.raises(DataError, match="not of the form"):
        revision_tokens_b("pythia-1b", "main")


# -------------------------------------------------------------------------------------------- schema violations


@pytest.mark.parametrize("change, field", [
    (lambda d: d.pop("all_head_selectivity"), "'all_head_selectivity'"),
    (lambda d: d["all_head_selectivity"]["L0_H0"].pop("first-token"), "all_head_selectivity.L0_H0.first-token"),
    (lambda d: d["all_head_selectivity"].pop("L1_H2"), "L1_H2"),
    (lambda d: d["all_head_selectivity"]["L0_H0"].update(induction="high"), "all_head_selectivity.L0_H0.induction"),
    (lambda d: d["all_head_selectivity"]["L0_H0"].update(induction=float("nan")), "non-finite"),
    (lambda d: d["all_head_selectivity"].update({"layer0head0": {}}), "layer0head0"),
    (lambda d: d.update(revision="step3001"), "'revision'"),
    (lambda d: d.update(model="EleutherAI/pythia-410m"), "'model'"),
])
def test_malformed_per_revision_file_names_file_and_field(published_fixture, change, field):  # noqa: F811
    path = pythia_file(published_fixture)
    edit_json(path, change)
    with pytest.raises(DataError) as err:
        load_published(published_fixture)
    assert path.name in str(err.value) and field in str(err.value)


def test_truncated_file_is_reported(published_fixture):  # noqa: F811
    path = pythia_file(published_fixture)
    path.write_text(path.read_text()[:500])
    with pytest.raises(DataError, match=f"{path.name}.*not valid JSON"):
        load_published(published_fixture)


def test_grid_must_agree_across_revisions(published_fixture):  # noqa: F811
    path = pythia_file(published_fixture, "step10000")
    edit_json(path, lambda d: [d["all_head_selectivity"].pop(f"L2_H{h}") for h in range(4)])
    with pytest.raises(DataError, match="2x4 heads, but other pythia-1b revisions have 3x4"):
        load_published(published_fixture)


@pytest.mark.parametrize("change, field", [
    (lambda d: d["pr"]["L0_H0"].pop(), "pr.L0_H0"),
    (lambda d: d.update(ckpt_tokens_B="[0.002, 0.536, 6.291, 20.971, 300.0]"), "ckpt_tokens_B"),
    (lambda d: d.update(ckpt_step="[1, 256, 3000, 10000]"), "ckpt_step"),
    (lambda d: d.update(revisions="['step1', 'step256'"), "revisions"),
    (lambda d: d["pr"].pop("L2_H3"), "'pr'"),
])
def test_malformed_trajectory_names_file_and_field(published_fixture, change, field):  # noqa: F811
    path = published_fixture / "pr_trajectory" / "pythia_1b_phase1_trajectory.json"
    edit_json(path, change)
    with pytest.raises(DataError) as err:
        load_published(published_fixture)
    assert path.name in str(err.value) and field in str(err.value)


def test_missing_data_errors(published_fixture, tmp_path):  # noqa: F811
    with pytest.raises(DataError, match="does not exist.*published fetch"):
        load_published(tmp_path / "nowhere")
    (tmp_path / "empty" / "per_revision").mkdir(parents=True)
    with pytest.raises(DataError, match="no pythia1b_mechinterp_\\*.json files"):
        load_published(tmp_path / "empty")
    with pytest.raises(DataError, match="olmoe_phase1_trajectory.json: missing"):
        load_published(published_fixture, require_pr=True)


# ------------------------------------------------------------------------------------------------ fetch and check


def manifest_for(files: dict[str, bytes]) -> list[ManifestEntry]:
    return [ManifestEntry(name, f"results/{name}", "0" * 40, len(data), hashlib.sha256(data).hexdigest())
            for name, data in files.items()]


def test_fetch_verifies_and_writes_atomically(tmp_path):
    files = {"per_revision/a.json": b'{"a": 1}', "ablation/b.json": b'{"b": 2}'}
    served = {f"results/{k}": v for k, v in files.items()}
    calls = []

    def download(url, timeout):
        calls.append(url)
        return served[url.split("/0000000000000000000000000000000000000000/")[1]]

    done = fetch_published(tmp_path / "out", manifest=manifest_for(files), download=download)
    assert done.table["action"].tolist() == ["downloaded", "downloaded"]
    assert (tmp_path / "out" / "per_revision" / "a.json").read_bytes() == b'{"a": 1}'
    assert not list((tmp_path / "out").rglob("*.tmp"))
    again = fetch_published(tmp_path / "out", manifest=manifest_for(files), download=download)
    assert again.table["action"].tolist() == ["present", "present"] and len(calls) == 2
    assert calls[0].startswith("https://raw.githubusercontent.com/skydancerosel/spectral-probe-circuits/")


def test_fetch_rejects_a_wrong_checksum(tmp_path):
    entries = manifest_for({"x.json": b"good"})
    with pytest.raises(DataError, match="sha256"):
        fetch_published(tmp_path, manifest=entries, download=lambda url, t: b"tampered")
    assert not (tmp_path / "x.json").exists()


def test_fetch_offline_says_to_use_from(tmp_path):
    def offline(url, timeout):
        raise urllib.error.URLError("Name or service not known")

    with pytest.raises(DataError, match="--from DIR"):
        fetch_published(tmp_path, manifest=manifest_for({"x.json": b"1"}), download=offline)


def test_fetch_from_a_local_copy_and_check(tmp_path):
    files = {"per_revision/a.json": b"123"}
    (tmp_path / "src" / "per_revision").mkdir(parents=True)
    (tmp_path / "src" / "per_revision" / "a.json").write_bytes(b"123")
    done = fetch_published(tmp_path / "dst", from_dir=tmp_path / "src", manifest=manifest_for(files))
    assert done.table["action"].tolist() == ["copied"]
    assert check_published(tmp_path / "dst", manifest=manifest_for(files))["status"].tolist() == ["ok"]
    (tmp_path / "dst" / "per_revision" / "a.json").write_bytes(b"124")
    assert check_published(tmp_path / "dst", manifest=manifest_for(files))["status"].tolist() == ["sha256 mismatch"]
    assert check_published(tmp_path / "none", manifest=manifest_for(files))["status"].tolist() == ["missing"]


def test_embedded_manifest_lists_paths_commits_and_hashes_only():
    entries = read_manifest()
    assert len(entries) == 39
    assert sum(e.local_path.startswith("per_revision/") for e in entries) == 30
    assert all(len(e.commit) == 40 and len(e.sha256) == 64 for e in entries)


# ---------------------------------------------------------------------------------------------------- the real data


def test_real_published_files_match_the_manifest_and_load(capsys):
    root = real_published_dir()
    assert (check_published(root)["status"] == "ok").all()
    assert cli.main(["published", "check", "--from", str(root)]) == 0
    assert "39/39 files match" in capsys.readouterr().out
    data = load_published(root)
    assert data.table.groupby("panel")["revision"].nunique().tolist() == [10, 10, 10]
    assert data.table["pr"].notna().all()


def test_cli_check_reports_a_user_error(published_fixture, capsys):  # noqa: F811
    assert cli.main(["published", "check", "--from", str(published_fixture)]) == 2  # not the pinned files
    assert "missing" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ the spectral top-K (issue 23)


def _consistent_breakdown(data):
    counts = {}
    for c in data["classifications"]:
        counts[c["classification"]] = counts.get(c["classification"], 0) + 1
    data["class_breakdown_topK"] = counts


def test_class_breakdown_is_read_and_checked(published_fixture):  # noqa: F811
    for path in (published_fixture / "per_revision").glob("pythia1b_*.json"):
        edit_json(path, _consistent_breakdown)
    data = load_published(published_fixture)
    top = data.topk
    assert set(top["panel"]) == {"pythia-1b"}  # the other fixture files carry an empty breakdown: no rows
    last = top[top["revision"] == "step143000"].set_index("class")["count"].to_dict()
    # the fixture lists L0H0 (previous-token 200x), L0H1 (self = local = 40: self first) and L0H2 (10x: none)
    assert last == {"previous-token": 1, "self": 1, "unclassified": 1}
    assert set(top["ranking"]) == {"integral"} and set(top["top_k"]) == {3}
    assert top.groupby("revision")["count"].sum().eq(3).all()


@pytest.mark.parametrize("breakdown, field", [
    ({"unclassified": 2}, "counts 2 heads, but `classifications` lists 3"),
    ({"unclassified": 2, "sink": 1}, "class_breakdown_topK.sink"),
    ({"unclassified": 3.5}, "class_breakdown_topK.unclassified"),
    ({"unclassified": 4, "self": -1}, "class_breakdown_topK.self"),
    (["unclassified"], "class_breakdown_topK"),
])
def test_malformed_class_breakdown_names_file_and_field(published_fixture, breakdown, field):  # noqa: F811
    path = pythia_file(published_fixture)
    edit_json(path, lambda d: d.update(class_breakdown_topK=breakdown))
    with pytest.raises(DataError) as err:
        load_published(published_fixture)
    assert path.name in str(err.value) and field in str(err.value)


def test_reanalyse_writes_the_top_k_and_the_lead_null(published_fixture, tmp_path):  # noqa: F811
    import pandas as pd

    from circuitdev.analysis.reanalysis import reanalyse

    for path in (published_fixture / "per_revision").glob("pythia1b_*.json"):
        edit_json(path, _consistent_breakdown)
    tables = reanalyse(published_fixture, tmp_path)
    topk = pd.read_csv(tmp_path / "spectral_topk.csv")
    assert list(topk.columns[:4]) == ["panel", "revision", "class", "count"]  # the contract, extras after
    pythia = topk[topk["panel"] == "pythia-1b"]
    assert set(pythia["source"]) == {"authors"} and set(topk[topk["panel"] == "olmo-1b-0724"]["source"]) == {
        "recomputed"}
    assert pythia.groupby("revision")["count"].sum().eq(3).all()
    null = pd.read_csv(tmp_path / "f5_lead_null.csv")
    assert {"model", "head_class", "rule", "null_mean", "p_value", "base_rate_first"} <= set(null.columns)
    assert set(null["rule"]) == {"fraction-of-peak", "peak-to-date"}
    assert "lead_censoring" in pd.read_csv(tmp_path / "f5_lead.csv").columns
    assert len(tables["f5_base_rate"])


def test_real_top_k_is_one_set_of_heads_and_our_recomputation_gives_the_authors_counts():
    """The authors' top 45 by PR integral is the same 45 heads in every file of a model, ranked as our
    `topk_heads` ranks them, and classified per revision our breakdown gives their class_breakdown_topK exactly.
    First-token heads are the largest class of it at the final revision of every model (the paper's reason)."""
    from circuitdev.analysis import findings as F

    data = load_published(real_published_dir())
    feats = data.features
    assert feats.groupby("panel")[["layer", "head"]].apply(lambda g: len(g.drop_duplicates())).eq(45).all()
    ours = F.topk_heads(data.table)
    for panel, g in ours.groupby("panel"):
        theirs = feats[(feats["panel"] == panel) & (feats["revision"] == feats.loc[feats["panel"] == panel,
                                                                                    "revision"].iloc[0])]
        theirs = theirs.sort_values("rank")
        assert list(zip(g["layer"], g["head"])) == list(zip(theirs["layer"], theirs["head"]))
        assert g["integral"].to_numpy() == pytest.approx(theirs["integral"].to_numpy(), rel=1e-9)
    breakdown = F.topk_breakdown(data.table).set_index(["panel", "revision", "class"])["count"]
    authors = data.topk.set_index(["panel", "revision", "class"])["count"]
    assert (breakdown[breakdown > 0].sort_index() == authors.sort_index()).all()
    assert breakdown.sum() == authors.sum() == 45 * 30
    dominance = F.topk_dominance(F.topk_breakdown(data.table)).set_index("panel")
    assert dominance["dominates"].all() and (dominance["largest"] == "first-token").all()

"""Panel files: the three shipped panels (exact revisions and token counts of method reference §6), validation errors,
name resolution, log-spaced hub panels."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from conftest import PUBLISHED as PUBLISHED_COPY

from circuitdev.errors import ConfigError, ModelUnavailableError
from circuitdev.sources.panels import (
    find_panel_file,
    list_panels,
    load_panel,
    parse_panel,
    write_panel,
)
from circuitdev.sources.hub_revisions import pick_log_spaced

PUBLISHED = PUBLISHED_COPY / "pr_trajectory"  # the authors' PR trajectories (see conftest)

# Method reference §6, typed in from the table (steps; tokens_B as the authors print them).
PYTHIA_STEPS = [1, 4, 16, 64, 256, 512, 3000, 10000, 38000, 143000]
PYTHIA_TOKENS_B_TRUNC = [0.002, 0.008, 0.033, 0.134, 0.536, 1.073, 6.291, 20.971, 79.691, 299.892]
OLMO_LABELS = [(1000, 2), (2000, 4), (5000, 10), (11000, 23), (25000, 52), (56000, 117), (126000, 264), (285000, 597),
               (644000, 1350), (1454000, 3048)]
OLMOE_LABELS = [(5000, 20), (10000, 41), (25000, 104), (50000, 209), (100000, 419), (200000, 838), (400000, 1677),
                (600000, 2516), (800000, 3355), (1220000, 5117)]


def test_shipped_panels_are_listed_and_valid():
    names = {p.name for p in list_panels()}
    assert {"pythia-1b", "olmo-1b-0724", "olmoe-1b-7b-0924"} <= names


def test_pythia_revisions_and_tokens():
    p = load_panel("pythia-1b")
    assert (p.model, p.family, p.dtype, p.is_local) == ("EleutherAI/pythia-1b", "gpt_neox", "fp32", False)
    assert [r.name for r in p.revisions] == [f"step{s}" for s in PYTHIA_STEPS]
    assert [r.step for r in p.revisions] == PYTHIA_STEPS
    assert [r.tokens for r in p.revisions] == [s * 2_097_152 for s in PYTHIA_STEPS]
    # the authors truncate to 0.001 B: our exact counts must truncate to their printed values
    assert [math.floor(r.tokens / 1e6) / 1000 for r in p.revisions] == PYTHIA_TOKENS_B_TRUNC


def test_olmo_revisions_use_the_branch_labels():
    p = load_panel("olmo-1b-0724")
    assert (p.model, p.family, p.dtype) == ("allenai/OLMo-1B-0724-hf", "olmo", "fp16")
    assert [r.name for r in p.revisions] == [f"step{s}-tokens{t}B" for s, t in OLMO_LABELS]
    assert [r.tokens for r in p.revisions] == [t * 10**9 for _, t in OLMO_LABELS]
    assert [r.step for r in p.revisions] == [s for s, _ in OLMO_LABELS]
    assert p.revisions[-1].tokens_b == 3048.0  # the label, not 1454000 * 2**21 / 1e9 = 3049.3


def test_olmoe_revisions_and_tokens():
    p = load_panel("olmoe-1b-7b-0924")
    assert (p.model, p.family, p.dtype) == ("allenai/OLMoE-1B-7B-0924", "olmoe", "fp16")
    assert [r.name for r in p.revisions] == [f"step{s}-tokens{t}B" for s, t in OLMOE_LABELS]
    assert [r.tokens for r in p.revisions] == [s * 4_194_304 for s, _ in OLMOE_LABELS]
    assert [r.tokens // 10**9 for r in p.revisions] == [t for _, t in OLMOE_LABELS]  # label = floor


@pytest.mark.skipif(not PUBLISHED.is_dir(), reason="the authors' published trajectories are not available here")
@pytest.mark.parametrize("panel,file,unit", [("pythia-1b", "pythia_1b_phase1_trajectory.json", 10**6),
                                             ("olmo-1b-0724", "olmo_phase1_trajectory.json", 10**9),
                                             ("olmoe-1b-7b-0924", "olmoe_phase1_trajectory.json", 10**9)])
def test_shipped_panels_match_the_published_runs(panel, file, unit):
    data = json.loads((PUBLISHED / file).read_text())
    p = load_panel(panel)
    assert p.model == data["model"]
    assert [r.name for r in p.revisions] == data["revisions"]
    assert [r.step for r in p.revisions] == data["ckpt_step"]
    # published tokens_B: Pythia truncated to 0.001 B, OLMo (labels) and OLMoE floored to whole B
    assert [r.tokens // unit * unit / 1e9 for r in p.revisions] == pytest.approx(data["ckpt_tokens_B"], abs=1e-9)


def _base(**changes):
    raw = {"name": "p", "model": "org/model", "family": "olmo", "dtype": "fp16",
           "revisions": [{"name": "step1", "tokens": 10}, {"name": "step2", "tokens": 20}]}
    raw.update(changes)
    return {k: v for k, v in raw.items() if v is not None}


@pytest.mark.parametrize(
    "changes,needle",
    [
        ({"family": "mamba"}, "family 'mamba' is unknown"),
        ({"dtype": "int8"}, "unknown dtype 'int8'"),
        ({"name": "bad/name"}, "name 'bad/name'"),
        ({"model": None}, "missing required field(s) ['model']"),
        ({"revisions": []}, "revisions is empty"),
        ({"revisions": [{"name": "step1"}]}, "missing `tokens`"),
        ({"revisions": [{"name": "step1", "tokens": 2.5}]}, "must be an integer"),
        ({"revisions": [{"name": "step1", "tokens": -1}]}, "must be >= 0"),
        ({"revisions": [{"name": "a", "tokens": 20}, {"name": "b", "tokens": 10}]}, "strictly increasing"),
        ({"revisions": [{"name": "a", "tokens": 1}, {"name": "a", "tokens": 2}]}, "listed twice"),
        ({"revisions": [{"name": "a", "tokens": 1, "sha": "x"}]}, "unknown key(s) ['sha']"),
        ({"revisions": [{"name": "../x", "tokens": 1}]}, "letters, digits"),
        ({"revisions": "step1"}, "revisions must be a list"),
        ({"probe": {"seq_lenn": 64}}, "probe: unknown probe parameter(s) ['seq_lenn']"),
        ({"probe": {"n": 0}}, "probe: n and n_pr must be >= 1"),
        ({"revison": []}, "unknown key(s) ['revison']"),
        ({"tokens_per_step": 4, "revisions": [{"name": "step2", "tokens": 9}]}, "tokens 9 != step 2 x tokens_per_step 4"),
        ({"source": "real"}, "source 'real'"),
    ],
)
def test_validation_errors_name_the_field(changes, needle):
    with pytest.raises(ConfigError) as err:
        parse_panel(_base(**changes), where="my.yaml")
    assert needle in str(err.value)
    assert str(err.value).startswith("my.yaml")


def test_tokens_from_tokens_per_step_and_step_names():
    p = parse_panel(_base(tokens_per_step=1000, revisions=["step3", {"name": "final", "step": 7}]))
    assert [(r.name, r.step, r.tokens) for r in p.revisions] == [("step3", 3, 3000), ("final", 7, 7000)]


def test_dtype_aliases_and_probe_config(tmp_path):
    p = parse_panel(_base(dtype="bfloat16", probe={"seq_len": 64, "n": 50}))
    assert p.dtype == "bf16"
    cfg = p.probe_config(n=10)
    assert (cfg.seq_len, cfg.n, cfg.dtype) == (64, 10, "bf16")  # file default, override, panel dtype
    assert p.probe_config(dtype="float32").dtype == "fp32"
    assert p.probe_config().config_hash() == p.probe_config(dtype="bf16").config_hash()


def test_model_folder_or_hub_id(tmp_path):
    (tmp_path / "ckpts").mkdir()
    assert parse_panel(_base(model="ckpts"), base=tmp_path).is_local  # an existing folder
    missing = parse_panel(_base(model="./missing"), base=tmp_path)
    assert missing.is_local and missing.model == str(tmp_path / "missing")  # ./ means a folder, even if absent
    assert parse_panel(_base(model="a/b/c"), base=tmp_path).is_local  # cannot be a hub id
    assert not parse_panel(_base(model="EleutherAI/pythia-1b"), base=tmp_path).is_local


def test_name_resolution(tmp_path, monkeypatch):
    assert find_panel_file("pythia-1b").name == "pythia-1b.yaml"
    f = tmp_path / "mine.yaml"
    f.write_text(yaml.safe_dump(_base(name="mine")))
    assert load_panel(str(f)).name == "mine"
    with pytest.raises(ConfigError, match="no panel named 'nope'.*pythia-1b"):
        load_panel("nope")
    with pytest.raises(ConfigError, match="does not exist"):
        load_panel(str(tmp_path / "absent.yaml"))
    # CIRCUITDEV_DATA moves the data folder; a panel there must be named after its file
    (tmp_path / "panels").mkdir()
    (tmp_path / "panels" / "other.yaml").write_text(yaml.safe_dump(_base(name="different")))
    monkeypatch.setenv("CIRCUITDEV_DATA", str(tmp_path))
    with pytest.raises(ConfigError, match="set `name: other`"):
        load_panel("other")


def test_invalid_yaml_is_a_config_error(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_panel(str(f))


def test_select_and_unknown_revision():
    p = load_panel("pythia-1b")
    assert [r.name for r in p.select(["step3000", "step1"])] == ["step1", "step3000"]  # panel order
    with pytest.raises(ConfigError, match="no revision 'step2'.*step1, step4"):
        p.revision("step2")


def test_pick_log_spaced_is_independent_of_a_geometric_grid():
    steps = list(range(0, 143001, 1000)) + [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    steps = sorted(set(steps))
    picked = pick_log_spaced(steps, 6)
    assert len(picked) == 6 and picked[0] == steps[0] and picked[-1] == steps[-1]
    # each pick is the available step nearest (in log) to 10**(k * log10(143000) / 5)
    for k, s in enumerate(picked[1:-1], start=1):
        target = math.log(143000) * k / 5
        best = min((abs(math.log(max(x, 1)) - target), x) for x in steps)[1]
        assert s == best
    assert pick_log_spaced([1, 2, 3], 10) == [1, 2, 3]


def test_log_spaced_hub_panel(monkeypatch, tmp_path):
    branches = ["main"] + [f"step{s}" for s in (0, 1, 2, 4, 8, 100, 1000, 5000, 10000)]
    monkeypatch.setattr("circuitdev.sources.hub_revisions.list_hub_branches", lambda model: branches)
    raw = _base(revisions={"log_spaced": 4}, tokens_per_step=10)
    p = parse_panel(raw)
    assert [r.name for r in p.revisions] == ["step0", "step8", "step1000", "step10000"]  # log targets 0, 3.07, 6.14, 9.21
    assert [r.tokens for r in p.revisions] == [0, 80, 10000, 100000]
    out = write_panel(p, tmp_path / "frozen.yaml")  # frozen: an explicit list that loads offline
    assert [r.name for r in load_panel(str(out)).revisions] == [r.name for r in p.revisions]
    assert parse_panel(raw, resolve_hub=False).revisions == ()


def test_log_spaced_offline_is_a_clear_error(monkeypatch):
    def offline(model):
        raise ModelUnavailableError(f"cannot list the revisions of {model} ...")

    monkeypatch.setattr("circuitdev.sources.hub_revisions.list_hub_branches", offline)
    with pytest.raises(ModelUnavailableError, match="org/model"):
        parse_panel(_base(revisions={"log_spaced": 3}, tokens_per_step=1))
    with pytest.raises(ConfigError, match="needs a hub model"):
        parse_panel(_base(model="./x", revisions={"log_spaced": 3}))

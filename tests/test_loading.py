"""Loading revisions: local-folder panels of the three families (bit-identical weights, eager attention, dtype),
missing folders and pickled-only checkpoints, family mismatch, the offline hub error, device choice."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
import yaml

from circuitdev.errors import ConfigError, ModelUnavailableError
from circuitdev.sources.loading import load_revision, resolve_device, torch_dtype
from circuitdev.sources.panels import load_panel
from conftest import TINY_FAMILIES, tiny_model


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_local_folder_panel_loads_bit_identical_weights(make_tiny_panel, family):
    panel = load_panel(make_tiny_panel(family, revisions=2))
    assert panel.is_local and panel.family == family
    model = load_revision(panel, "step1", device="cpu", progress=False)
    reference = tiny_model(family, seed=101).state_dict()  # write_tiny_panel saves revision i with seed 100 + i
    loaded = model.state_dict()
    assert set(loaded) == set(reference)
    for name, tensor in reference.items():
        assert torch.equal(loaded[name], tensor), name
    assert model.config._attn_implementation == "eager"
    assert not model.training and next(model.parameters()).dtype == torch.float32
    # eager attention returns probabilities (sdpa would return none)
    out = model(torch.arange(3, 13)[None], output_attentions=True)
    assert len(out.attentions) == 2 and torch.allclose(out.attentions[0].sum(-1), torch.ones(1, 4, 10))


def test_revisions_differ_and_dtype_override(make_tiny_panel):
    panel = load_panel(make_tiny_panel("olmo", revisions=2))
    a = load_revision(panel, "step0", progress=False)
    b = load_revision(panel, "step1", dtype="fp16", progress=False)
    assert next(b.parameters()).dtype == torch.float16
    wa, wb = a.model.embed_tokens.weight, b.model.embed_tokens.weight
    assert not torch.equal(wa.half(), wb)


def test_missing_local_folders_are_reported_as_folders(make_tiny_panel, tmp_path):
    path = make_tiny_panel("gpt_neox", revisions=2)
    panel = load_panel(path)
    shutil.rmtree(panel.revision_path("step1"))
    with pytest.raises(ModelUnavailableError, match=r"revision 'step1'.*local folder .*step1 does not exist"):
        load_revision(panel, "step1", progress=False)
    shutil.rmtree(panel.model)
    with pytest.raises(ModelUnavailableError, match="model folder .* does not exist") as err:
        load_revision(panel, "step0", progress=False)
    assert "repo id" not in str(err.value) and "HFValidationError" not in str(err.value)


def test_pickled_weights_are_refused(make_tiny_panel):
    panel = load_panel(make_tiny_panel("gpt_neox", revisions=1))
    folder = panel.revision_path("step0")
    state = load_revision(panel, "step0", progress=False).state_dict()
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    with pytest.raises(ModelUnavailableError, match="only from safetensors"):
        load_revision(panel, "step0", progress=False)


def test_family_mismatch_is_caught(make_tiny_panel, tmp_path):
    path = make_tiny_panel("olmo", revisions=1)
    raw = yaml.safe_load(path.read_text())
    raw["family"] = "olmoe"  # same module paths as olmo: only the model_type tells them apart
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="says family 'olmoe'.*model_type 'olmo'"):
        load_revision(load_panel(path), "step0", progress=False)


def test_offline_hub_gives_one_clear_error():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set by conftest before huggingface_hub is imported
    with pytest.raises(ModelUnavailableError) as err:  # HF_HUB_OFFLINE: no request, so no retry (bench/timings.py)
        load_revision(load_panel("pythia-1b"), "step3000", progress=False)
    msg = str(err.value)
    assert "EleutherAI/pythia-1b" in msg and "'step3000'" in msg and "offline" in msg
    assert "local-folder panel" in msg and "hf download EleutherAI/pythia-1b --revision step3000" in msg


def test_offline_translation_of_the_error_chain():
    from huggingface_hub.errors import LocalEntryNotFoundError

    from circuitdev.sources.loading import _unavailable

    panel = load_panel("olmo-1b-0724")
    rev = panel.revisions[0]
    try:
        try:
            raise LocalEntryNotFoundError("not cached")
        except LocalEntryNotFoundError as inner:
            raise OSError("We couldn't connect to 'https://huggingface.co'") from inner
    except OSError as outer:
        err = _unavailable(panel, rev, outer)
    assert isinstance(err, ModelUnavailableError)
    assert "allenai/OLMo-1B-0724-hf" in str(err) and "step1000-tokens2B" in str(err)


def test_device_and_dtype_choice():
    expected = "cuda" if torch.cuda.is_available() else None
    dev = resolve_device(None)
    assert dev.type == expected or (expected is None and dev.type in ("cpu", "mps"))
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            resolve_device("cuda")
    with pytest.raises(ConfigError, match="unknown device"):
        resolve_device("tpu9")
    assert torch_dtype("float16") is torch.float16 and torch_dtype("bf16") is torch.bfloat16


def test_a_mixture_of_experts_runs_its_experts_in_a_loop_on_a_cpu_with_the_same_logits(make_tiny_panel):
    """On a CPU, load_revision asks for OLMoE's plain expert loop (faster there than transformers' grouped_mm
    default on small experts): the same logits as the default, bit for bit."""
    from transformers import AutoModelForCausalLM

    path = make_tiny_panel("olmoe", revisions=1)
    panel = load_panel(path)
    ours = load_revision(panel, "step0", device="cpu", progress=False)
    assert ours.config._experts_implementation == "eager"
    default = AutoModelForCausalLM.from_pretrained(panel.revision_path("step0"), attn_implementation="eager").eval()
    assert default.config._experts_implementation != "eager"  # the test compares two implementations
    ids = torch.randint(0, 100, (6, 20))
    with torch.no_grad():
        assert torch.equal(ours(input_ids=ids).logits, default(input_ids=ids).logits)

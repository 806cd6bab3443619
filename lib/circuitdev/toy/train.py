"""Train the toy panel: one tiny model per family, checkpoints on a grid, one panel file per family.

Layout (data/toy/ is git-ignored):
    data/toy/_corpus/<corpus_hash>/{tokenizer.json, stream.npy}     shared by the three families of one seed
    data/toy/<panel>/<revision>/{config.json, model.safetensors, tokenizer files}   the grid and the dense grid
    data/toy/<panel>/recipe.json                                     the recipe and its hash (reuse check)
    data/panels/<panel>.yaml                                         model: ../toy/<panel>
Re-running with the same recipe reuses every checkpoint; a changed recipe retrains that panel from scratch, and so
does a panel whose dense checkpoints (`ToyRecipe.dense_every`, the candidates of `circuitdev refine`) are missing --
saving them changes no weight, so the grid's checkpoints come out the same.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from circuitdev.atomic import write_atomic
from circuitdev.errors import ConfigError
from circuitdev.paths import data_dir as default_data_dir
from circuitdev.toy.recipe import FAMILIES, PANEL_NAMES, Mixture, ToyRecipe, recipe_of, revision_name


# --- one table of per-family config builders (no per-family copies of the training logic)
def _common(r: ToyRecipe) -> dict:
    from circuitdev.toy.tokenizer import EOS_ID

    return dict(vocab_size=r.vocab_size, hidden_size=r.d_model, num_hidden_layers=r.n_layer,
                num_attention_heads=r.n_head, max_position_embeddings=max(r.seq_len, r.probe_seq_len, 256),
                tie_word_embeddings=True, bos_token_id=EOS_ID, eos_token_id=EOS_ID, pad_token_id=EOS_ID)


def _gpt_neox(r: ToyRecipe):
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(**_common(r), intermediate_size=r.d_ff, use_parallel_residual=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
                         hidden_dropout=0.0, attention_dropout=0.0)


def _olmo(r: ToyRecipe):
    from transformers import OlmoConfig

    return OlmoConfig(**_common(r), intermediate_size=r.d_ff, num_key_value_heads=r.n_head)


def _olmoe(r: ToyRecipe):
    from transformers import OlmoeConfig

    return OlmoeConfig(**_common(r), intermediate_size=r.d_ff_expert, num_key_value_heads=r.n_head,
                       num_experts=r.n_experts, num_experts_per_tok=r.top_k, output_router_logits=True,
                       router_aux_loss_coef=r.router_aux_loss_coef)


CONFIG_BUILDERS = {"gpt_neox": _gpt_neox, "olmo": _olmo, "olmoe": _olmoe}


def build_model(family: str, recipe: ToyRecipe, attn_implementation: str = "sdpa"):
    from transformers import AutoModelForCausalLM

    if family not in CONFIG_BUILDERS:
        raise ConfigError(f"unknown toy family {family!r}; known: {', '.join(FAMILIES)}")
    return AutoModelForCausalLM.from_config(CONFIG_BUILDERS[family](recipe), attn_implementation=attn_implementation)


# --- corpus + tokenizer (built once per seed, shared by the families)
def prepare_corpus(recipe: ToyRecipe, data_dir: Path | None = None) -> Path:
    from circuitdev.toy.corpus import generate_corpus, pack
    from circuitdev.toy.tokenizer import EOS_ID, train_tokenizer

    folder = (data_dir or default_data_dir()) / "toy" / "_corpus" / recipe.corpus_hash()
    if (folder / "stream.npy").exists() and (folder / "tokenizer.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    docs = generate_corpus(recipe.seed, recipe.corpus_words, recipe.lexicon_size, n_topics=recipe.n_topics)
    tok = train_tokenizer(docs, recipe.vocab_size)
    stream = pack(tok, docs, EOS_ID)
    # atomic: the pipeline trains each toy panel in its own job, and those of one seed may build its corpus at once
    write_atomic(folder / "tokenizer.json", tok.to_str(pretty=True))  # the bytes `save` writes
    buf = io.BytesIO()
    np.save(buf, stream)
    write_atomic(folder / "stream.npy", buf.getvalue())  # last: its presence says the corpus is complete
    return folder


def sample_windows(kind: str, n: int, recipe: ToyRecipe | None = None, *, seed: int = 1,
                   data_dir: Path | None = None) -> np.ndarray:
    """(n, seq_len) int64 training windows of one kind (`WINDOW_KINDS`) from the recipe's corpus (built when
    missing), with the BOS at position 0 when the recipe trains with it."""
    from circuitdev.toy.corpus import WindowSampler

    recipe = recipe or ToyRecipe()
    stream = np.load(prepare_corpus(recipe, data_dir) / "stream.npy")
    mixture = Mixture.only(kind, bos=recipe.trains_with_bos)
    return WindowSampler(stream, mixture, recipe.seq_len, recipe.probe_vocab_range, seed).batch(n)


def lr_at(step: int, r: ToyRecipe) -> float:
    """Linear warmup, then cosine from lr to lr * min_lr_frac."""
    if step < r.warmup:
        return r.lr * (step + 1) / r.warmup
    t = (step - r.warmup) / max(1, r.steps - r.warmup)
    return r.lr * (r.min_lr_frac + (1 - r.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def checkpoint_saved(folder: Path) -> bool:
    """A checkpoint folder holds its config and weights (a crash mid-save leaves one without)."""
    return (folder / "config.json").exists() and (folder / "model.safetensors").exists()


def checkpoints_ready(panel_dir: Path, recipe: ToyRecipe, *, dense: bool = True) -> bool:
    """The panel's checkpoints are on disk from this recipe (recipe.json's hash): its grid and, with dense=True, its
    dense grid too -- everything training saves (`train_family` reuses a panel only then)."""
    try:
        if json.loads((panel_dir / "recipe.json").read_text()).get("hash") != recipe.recipe_hash():
            return False
    except (OSError, ValueError):
        return False
    steps = (*recipe.grid(), *recipe.dense_grid()) if dense else recipe.grid()
    return all(checkpoint_saved(panel_dir / revision_name(s)) for s in steps)


def panel_file(panel: str, data_dir: Path | None = None) -> Path:
    """<data>/panels/<panel>.yaml, the panel file `write_panel_file` writes."""
    return Path(data_dir or default_data_dir()) / "panels" / f"{panel}.yaml"


def panel_ready(panel: str, recipe: ToyRecipe | None = None, data_dir: Path | None = None) -> bool:
    """A toy panel can be probed: its panel file is written and its grid's checkpoints are on disk from `recipe`
    (default: its preset's, `recipe_of`). The dense checkpoints (the pool of `circuitdev refine`) are not needed."""
    recipe = recipe or recipe_of(panel)[1]
    data_dir = Path(data_dir or default_data_dir())
    return panel_file(panel, data_dir).is_file() and checkpoints_ready(data_dir / "toy" / panel, recipe, dense=False)


def train_family(family: str, recipe: ToyRecipe | None = None, data_dir: Path | None = None, *,
                 progress: bool = True, position: int = 0, force: bool = False, threads: int = 1,
                 on_log: Callable[[int, float], None] | None = None, log_every: int = 25,
                 stop_after: int | None = None) -> dict:
    """Train one family (or reuse its checkpoints) and write its panel file. Returns a summary dict.

    threads: torch's intra-op threads for this run. torch's float results depend on it, so a recipe gives
    bit-identical checkpoints only at the same thread count (the shipped panels: 1 per family).
    on_log: called every `log_every` steps with (step, mean training loss of the last `log_every` steps) -- e.g. to
    draw a live loss curve in a notebook; it does not touch the training (the same checkpoints with or without it).
    Not called when the checkpoints are reused.
    stop_after: end after this step (its checkpoints up to there saved, no recipe.json: the panel is not complete)
    -- the first checkpoints of a long recipe, exactly as its full run makes them (the schedule is the full run's),
    to check a recorded run against (tests/test_toy_trials.py).
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards" at every checkpoint would drown the training bars
    recipe = recipe or ToyRecipe()
    data_dir = Path(data_dir or default_data_dir())
    if family not in PANEL_NAMES:
        raise ConfigError(f"unknown toy family {family!r}; known: {', '.join(FAMILIES)}")
    panel = recipe.panel_name(family)
    if stop_after is not None and not 0 <= stop_after <= recipe.steps:
        raise ConfigError(f"stop_after={stop_after} must lie in 0..steps={recipe.steps}")
    if not force and stop_after is None and checkpoints_ready(data_dir / "toy" / panel, recipe):
        write_panel_file(family, recipe, data_dir)
        return {"panel": panel, "reused": True, "seconds": 0.0}
    seconds, losses = _train_checkpoints(family, recipe, data_dir, progress=progress, position=position,
                                         threads=threads, on_log=on_log, log_every=log_every, stop_after=stop_after)
    write_panel_file(family, recipe, data_dir)
    return {"panel": panel, "reused": False, "seconds": seconds,
            "final_loss": float(np.mean(losses[-50:])) if losses else float("nan"), "stopped_after": stop_after}


def _train_checkpoints(family: str, recipe: ToyRecipe, data_dir: Path, *, progress: bool, position: int,
                       threads: int, on_log: Callable[[int, float], None] | None,
                       log_every: int, stop_after: int | None = None) -> tuple[float, list[float]]:
    """Train one family from scratch, saving its checkpoints and recipe.json in its panel folder (up to step
    `stop_after`, without recipe.json, when given). Returns (seconds, the training loss of every step)."""
    import torch
    from tqdm.auto import tqdm

    from circuitdev.toy.corpus import WindowSampler
    from circuitdev.toy.tokenizer import load_tokenizer, to_hf

    panel = recipe.panel_name(family)
    panel_dir = data_dir / "toy" / panel
    grid = recipe.grid()
    dense = set(recipe.dense_grid())  # extra checkpoints for `circuitdev refine`: saving them changes no weight
    corpus = prepare_corpus(recipe, data_dir)
    stream = np.load(corpus / "stream.npy")
    hf_tok = to_hf(load_tokenizer(corpus / "tokenizer.json"))
    _clear_panel_dir(panel_dir)

    torch.set_num_threads(threads)
    torch.manual_seed(recipe.seed)
    model = build_model(family, recipe)
    model.train()
    sampler = WindowSampler(stream, recipe.mixture, recipe.seq_len, recipe.probe_vocab_range, recipe.seed)
    opt = _optimizer(model, recipe)

    def save(step: int) -> None:
        out = panel_dir / revision_name(step)
        model.save_pretrained(out)
        hf_tok.save_pretrained(out)

    t0 = time.time()
    bar = tqdm(total=recipe.steps, desc=panel, position=position, disable=not progress, leave=True,
               dynamic_ncols=True)
    if 0 in grid:
        save(0)
    losses = _train_steps(model, opt, sampler, recipe, bar, on_log, log_every,
                          on_step=lambda step: save(step) if step in grid or step in dense else None,
                          last=recipe.steps if stop_after is None else stop_after)
    bar.close()
    seconds = time.time() - t0
    if stop_after is not None:  # a part of the run: its recipe.json would say the panel is complete
        return seconds, losses
    write_atomic(panel_dir / "recipe.json", json.dumps(
        {"hash": recipe.recipe_hash(), "recipe": recipe.to_dict(), "family": family, "seconds": round(seconds, 1),
         "final_loss": float(np.mean(losses[-50:])), "grid": list(grid), "dense": sorted(dense)}, indent=1))
    return seconds, losses


def _clear_panel_dir(panel_dir: Path) -> None:
    """Make the panel folder ready for a fresh run: checkpoints of an earlier recipe must not outlive it."""
    panel_dir.mkdir(parents=True, exist_ok=True)
    (panel_dir / "recipe.json").unlink(missing_ok=True)
    for stale in panel_dir.glob("step*"):
        shutil.rmtree(stale)


def _optimizer(model, recipe: ToyRecipe):
    """AdamW with weight decay on the matrices only (biases and norms: none)."""
    import torch

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": recipe.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=recipe.lr, betas=recipe.betas)


def _train_steps(model, opt, sampler, recipe: ToyRecipe, bar, on_log: Callable[[int, float], None] | None,
                 log_every: int, on_step: Callable[[int], None], last: int | None = None) -> list[float]:
    """The training loop, steps 1..recipe.steps (or 1..last); `on_step(step)` runs after each (to save
    checkpoints). Returns the training loss of every step."""
    import torch

    losses = []
    for step in range(1, (recipe.steps if last is None else last) + 1):
        if (mix := recipe.mixture_at(step)) is not sampler.mix:  # a curriculum phase starts
            sampler.set_mixture(mix)
        x = torch.from_numpy(sampler.batch(recipe.batch_size))  # (B, T)
        for g in opt.param_groups:
            g["lr"] = lr_at(step - 1, recipe)
        out = model(input_ids=x, labels=x)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        if recipe.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        opt.step()
        losses.append(float(out.loss.detach()))
        if step % 25 == 0:
            bar.set_postfix(loss=f"{np.mean(losses[-25:]):.3f}")
        if on_log is not None and step % log_every == 0:
            on_log(step, float(np.mean(losses[-log_every:])))
        bar.update(1)
        on_step(step)
    return losses


def write_panel_file(family: str, recipe: ToyRecipe, data_dir: Path | None = None) -> Path:
    """data/panels/<panel>.yaml: the panels contract (name, model, family, dtype, revisions, probe defaults)."""
    import yaml

    data_dir = Path(data_dir or default_data_dir())
    panel = recipe.panel_name(family)
    doc = {
        "name": panel,
        "model": f"../toy/{panel}",
        "family": family,
        "dtype": recipe.dtype,
        "description": f"Toy {family} model trained on CPU by `circuitdev toy train` (recipe {recipe.recipe_hash()}, "
                       "see book/toy_recipe.md).",
        "revisions": [{"name": revision_name(s), "tokens": int(s * recipe.tokens_per_step)} for s in recipe.grid()],
        "probe": recipe.probe_defaults(family),
    }
    if recipe.dense_grid():  # the dense checkpoints: not probed by default, the pool `circuitdev refine` draws from
        doc["candidates"] = [{"name": revision_name(s), "tokens": int(s * recipe.tokens_per_step)}
                             for s in recipe.dense_grid()]
    return write_atomic(panel_file(panel, data_dir),
                        yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))


def _worker(args, on_log: Callable[[int, float], None] | None = None) -> dict:
    family, recipe_dict, data_dir, progress, position, force, threads = args
    return train_family(family, ToyRecipe.from_dict(recipe_dict), Path(data_dir), progress=progress,
                        position=position, force=force, threads=threads, on_log=on_log)


def train_all(recipe: ToyRecipe | Sequence[ToyRecipe] | None = None, families: tuple[str, ...] = FAMILIES,
              data_dir: Path | None = None, *, jobs: int | None = None, progress: bool = True, force: bool = False,
              threads: int | None = None, on_log: Callable[[int, float], None] | None = None) -> list[dict]:
    """Train the families in parallel processes (one thread each). jobs=None: min(runs, CPUs).

    recipe: one recipe, or several (e.g. seed replicas, `circuitdev toy train --seeds`): every (recipe, family)
    pair is one run, all in one pool. Results in recipe order, then family order.

    threads: torch threads per training process (None: 1, the shipped panels' setting; see `train_family`).
    on_log: `train_family`'s loss hook; only when the families train in this process (jobs=1 or one family), one
    family after another, each from step 1 (in the order trained: OLMoE first).
    """
    recipes = [recipe or ToyRecipe()] if recipe is None or isinstance(recipe, ToyRecipe) else list(recipe)
    data_dir = Path(data_dir or default_data_dir())
    for f in families:
        if f not in CONFIG_BUILDERS:
            raise ConfigError(f"unknown toy family {f!r}; known: {', '.join(FAMILIES)}")
    for r in recipes:
        prepare_corpus(r, data_dir)  # once per seed, before the workers
    runs = [(r, f) for r in recipes for f in families]
    jobs = jobs or min(len(runs), os.cpu_count() or 1)
    # slowest first (OLMoE's experts cost ~1.4x a dense step): with 2 workers the two dense runs share one worker
    # while OLMoE runs on the other, instead of OLMoE running alone at the end
    order = sorted(range(len(runs)), key=lambda i: runs[i][1] != "olmoe")
    tasks = [(runs[i][1], runs[i][0].to_dict(), str(data_dir), progress, pos, force, threads or 1)
             for pos, i in enumerate(order)]
    if jobs <= 1 or len(tasks) == 1:  # in this process (the same training either way)
        results = [_worker(t, on_log) for t in tasks]
    elif on_log is not None:
        raise ConfigError("on_log needs the families trained in this process: pass jobs=1 (or one family)")
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as ex:
            results = list(ex.map(_worker, tasks))
    by_run = dict(zip(order, results))
    return [by_run[i] for i in range(len(runs))]

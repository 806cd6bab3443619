"""Ablation and null-PR cost benchmark (issue 34): the three per-revision jobs of a toy panel, side by side in one run.

A local-folder panel of the toy panels' shape (GPT-NeoX, 4 layers x 4 heads, d_model 64, vocabulary 1024, tied
embeddings; random weights, one seed per revision) with the toy panels' probe defaults (N=500, T=64, `ToyRecipe`'s
probe_defaults) is written to a temporary folder; then, in this order and each timed as a whole job (loads
included): `probe_panel` (what `probe_toy` runs), `ablate_over_training` (`ablate_toy`) and `null_pr_over_training`
(`null_pr_toy`). Random weights have no induction head at 50x, so the circuit is taken at a threshold that selects
the final revision's top `--circuit` induction heads (the cost depends on the number of conditions, not on which
heads). Ratios are of the process's CPU time (all threads), which machine load disturbs less than wall time.

Targets (issue 34): ablate <= 2x probe, null PR <= 0.5x probe.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/ablation_cost.py [--revisions 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def write_panel(folder: Path, revisions: int) -> Path:
    import torch
    import yaml
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    from circuitdev.toy.recipe import ToyRecipe

    shape = dict(vocab_size=1024, max_position_embeddings=256, num_hidden_layers=4, num_attention_heads=4,
                 hidden_size=64, intermediate_size=256, rotary_pct=1.0, tie_word_embeddings=True)
    revs = []
    for i in range(revisions):
        torch.manual_seed(100 + i)
        model = AutoModelForCausalLM.from_config(GPTNeoXConfig(**shape), attn_implementation="eager")
        model.save_pretrained(folder / "bench-toy" / f"step{i}")
        revs.append({"name": f"step{i}", "step": i, "tokens": i * 1024})
    panel = {"name": "bench-toy", "model": "./bench-toy", "family": "gpt_neox", "dtype": "fp32",
             "tokens_per_step": 1024, "description": "random toy-shaped panel (bench/ablation_cost.py)",
             "probe": ToyRecipe().probe_defaults(), "revisions": revs}
    path = folder / "bench-toy.yaml"
    path.write_text(yaml.safe_dump(panel, sort_keys=False))
    return path


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--revisions", type=int, default=4)
    ap.add_argument("--circuit", type=int, default=4, help="heads in the ablated circuit")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (the pipeline's jobs use 1)")
    args = ap.parse_args()

    import torch

    from circuitdev.sources.ablate import ablate_over_training
    from circuitdev.sources.null_pr import null_pr_over_training
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.run import probe_panel

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="circuitdev-bench-") as tmp:
        tmp = Path(tmp)
        panel = load_panel(write_panel(tmp, args.revisions))
        out = tmp / "results"
        jobs = {}
        _, *jobs["probe"] = timed(lambda: probe_panel(panel, results_dir=out, progress=False))
        table = PanelRecords(out, panel.name, panel).read(on_missing="raise").table
        final = table[table["revision"] == f"step{args.revisions - 1}"]
        threshold = float(final["sel_induction"].nlargest(args.circuit).iloc[-1])
        run, *jobs["ablate"] = timed(lambda: ablate_over_training(panel, results_dir=out, threshold=threshold,
                                                                  progress=False))
        _, *jobs["null_pr"] = timed(lambda: null_pr_over_training(panel, results_dir=out, progress=False))
    print(f"toy-shaped panel, {args.revisions} revisions, N=500, T=64, {args.threads} thread(s); circuit "
          f"{' '.join(run.sidecar['circuit'])}, {len(run.sidecar.get('random_groups', []))} matched + "
          f"{len(run.sidecar.get('random_any_groups', []))} any-layer groups")
    print(f"{'job':8s} {'wall s':>8s} {'CPU s':>8s} {'x probe (CPU)':>14s} {'x probe (wall)':>15s}")
    for name, (wall, cpu) in jobs.items():
        print(f"{name:8s} {wall:8.2f} {cpu:8.2f} {cpu / jobs['probe'][1]:14.2f} {wall / jobs['probe'][0]:15.2f}")
    conditions = 2 + len(run.sidecar.get("random_groups", [])) + len(run.sidecar.get("random_any_groups", []))
    forwards = conditions * args.revisions
    print(f"ablate: {conditions} conditions x {args.revisions} revisions of N=500 -> "
          f"{jobs['ablate'][1] / forwards:.3f} CPU s per condition (= {jobs['ablate'][1] / forwards / (jobs['probe'][1] / args.revisions):.2f} "
          "probes of a revision); the toy panels' circuits (3-4 heads filling most of layer 1) have ~13 conditions")
    print("targets: ablate <= 2.00x probe, null_pr <= 0.50x probe")


if __name__ == "__main__":
    main()

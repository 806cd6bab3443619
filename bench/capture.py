"""Capture benchmark: plain forward vs the paper's route (output_attentions on all layers) vs circuitdev's capture.

A random-init model of Pythia-160M's shape (12 layers, 12 heads, d_model 768), 64 sequences x 256 tokens, CPU.
Each variant runs in a fresh subprocess so that its peak resident memory can be read cleanly; the figure reported is
the peak RSS during the run minus the RSS just before it (model loaded, batch built). Ratios are against the plain
forward with the same attention implementation, measured in the same invocation.

    .venv/bin/python bench/capture.py [--n 64] [--seq-len 256] [--batch-size 8] [--repeats 3] [--shape pythia-160m]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

SHAPES = {
    "pythia-160m": dict(num_hidden_layers=12, num_attention_heads=12, hidden_size=768, intermediate_size=3072),
    "pythia-1b": dict(num_hidden_layers=16, num_attention_heads=8, hidden_size=2048, intermediate_size=8192),
}
VARIANTS = ("plain_eager", "paper_output_attentions", "capture", "plain_sdpa")


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_variant(variant: str, n: int, seq_len: int, batch_size: int, shape: str, device: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    from circuitdev.measure.batch import induction_batch
    from circuitdev.measure.capture import capture

    torch.manual_seed(0)
    cfg = GPTNeoXConfig(vocab_size=50304, max_position_embeddings=2048, rotary_pct=0.25, **SHAPES[shape])
    attn = "sdpa" if variant == "plain_sdpa" else "eager"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn).to(device).eval()
    ids = torch.as_tensor(induction_batch(n=n, seq_len=seq_len).tokens, device=device)

    def once() -> None:
        with torch.no_grad():
            if variant == "capture":
                capture(model, ids, batch_size=batch_size)
                return
            kept = []
            for s in range(0, n, batch_size):
                out = model(ids[s:s + batch_size], output_attentions=variant == "paper_output_attentions")
                if variant == "paper_output_attentions":  # the paper keeps the query row of every layer
                    kept.append(torch.stack([a[:, :, -1, :].float().cpu() for a in out.attentions], 1))

    once()  # warm-up (also loads lazy modules)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    before = rss_mb()
    t0 = time.perf_counter()
    once()
    if device == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu_peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else float("nan")
    return {"variant": variant, "wall_s": wall, "peak_mb": peak - before, "gpu_peak_mb": gpu_peak}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds; the best wall time per variant is kept")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="pythia-160m")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:  # child process
        print(json.dumps(run_variant(args.variant, args.n, args.seq_len, args.batch_size, args.shape, args.device)))
        return
    # Rounds interleave the variants so that a change in machine load hits all of them alike; the best round counts.
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for round_ in range(args.repeats):
        for variant in VARIANTS:
            cmd = [sys.executable, __file__, "--variant", variant, "--n", str(args.n), "--seq-len", str(args.seq_len),
                   "--batch-size", str(args.batch_size), "--shape", args.shape, "--device", args.device]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1]
            runs[variant].append(json.loads(out))
            print(f"  round {round_ + 1} {variant}: {runs[variant][-1]}", flush=True)
    results = {v: min(r, key=lambda x: x["wall_s"]) for v, r in runs.items()}
    base = results["plain_eager"]
    print(f"shape={args.shape} n={args.n} seq_len={args.seq_len} batch_size={args.batch_size} device={args.device}")
    print(f"{'variant':26s} {'wall s':>8s} {'x plain':>8s} {'peak MB':>9s} {'x plain':>8s} {'GPU MB':>8s}")
    for v, r in results.items():
        ref = results["plain_sdpa"] if v == "plain_sdpa" else base
        print(f"{v:26s} {r['wall_s']:8.2f} {r['wall_s'] / ref['wall_s']:8.2f} {r['peak_mb']:9.0f} "
              f"{r['peak_mb'] / max(ref['peak_mb'], 1e-9):8.2f} {r['gpu_peak_mb']:8.0f}")
    print("x plain: ratio to plain_eager (same attention implementation); plain_sdpa is its own reference.")


if __name__ == "__main__":
    main()

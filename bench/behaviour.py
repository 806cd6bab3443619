"""Behaviour benchmark: the probe with and without the behaviour reductions (issue 23), side by side in one run.

The behaviour (top-1 and loss of B at the query, the ICL score, the first-position norms; `measure.behaviour`) is
read from the probe's own forward passes: the capture pass also reads every layer's output and the logits at the
query, the prefix-matching pass also reads its logits, and each is reduced per sequence inside the trace. No forward
pass is added; what it costs is those extra reads, the reductions and the bootstrap over per-sequence values.

A random-init model of Pythia-160M's shape (12 layers x 12 heads, d_model 768, vocabulary 50304: the logits are the
expensive part of the reductions), eager attention, CPU; `probe_model` with the paper's defaults except the batch
(N sequences of T tokens), once with `behaviour=False` and once with `behaviour=True`, in interleaved rounds (the best
round counts, so a change in machine load hits both alike). Wall time follows the machine's load, so the figure that
counts is the process's CPU time (all its threads).

    .venv/bin/python bench/behaviour.py [--n 200] [--seq-len 256] [--n-prefix 64] [--repeats 2] [--threads 2]
    .venv/bin/python bench/behaviour.py --toy      # the toy panel's shape instead (4 x 4 heads, d 64, vocab 1024)
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--n-prefix", type=int, default=64, help="repeated sequences (the ICL score's batch)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2, help="interleaved rounds; the best CPU time per variant is kept")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--toy", action="store_true", help="the toy panel's model shape and probe batch")
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    from circuitdev.measure.config import ProbeConfig
    from circuitdev.measure.probe import probe_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.toy:
        shape = dict(vocab_size=1024, max_position_embeddings=256, num_hidden_layers=4, num_attention_heads=4,
                     hidden_size=64, intermediate_size=256)
        base = ProbeConfig(n=500, seq_len=64, vocab_range=(258, 1024), first_token_id=0, baseline_excludes_ab=True,
                           batch_size=250, dtype="fp32")
        what = "toy shape (4 x 4 heads, d_model 64, vocab 1024), N=500, T=64"
    else:
        shape = dict(vocab_size=50304, max_position_embeddings=2048, rotary_pct=0.25, num_hidden_layers=12,
                     num_attention_heads=12, hidden_size=768, intermediate_size=3072)
        base = ProbeConfig(n=args.n, seq_len=args.seq_len, n_prefix=args.n_prefix, batch_size=args.batch_size,
                           dtype="fp32")
        what = f"Pythia-160M shape (12 x 12 heads, d_model 768, vocab 50304), N={args.n}, T={args.seq_len}"
    model = AutoModelForCausalLM.from_config(GPTNeoXConfig(**shape), attn_implementation="eager").eval()
    probe_model(model, base.replace(n=16, n_boot=0, n_prefix=0, n_nulls=0), progress=False)  # warm-up
    variants = {"without": False, "with": True}
    runs: dict[str, list[dict]] = {k: [] for k in variants}
    for round_ in range(args.repeats):
        for name, on in variants.items():
            t0, c0 = time.perf_counter(), time.process_time()
            result = probe_model(model, base, progress=False, behaviour=on)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            runs[name].append({"wall_s": wall, "cpu_s": cpu, **result.timings})
            print(f"  round {round_ + 1} {name} behaviour: {wall:.1f}s wall, {cpu:.1f}s CPU (capture "
                  f"{result.timings['capture_s']:.1f}s, prefix {result.timings.get('prefix_s', 0.0):.1f}s)",
                  flush=True)
    best = {k: min(v, key=lambda r: r["cpu_s"]) for k, v in runs.items()}
    off, on = best["without"], best["with"]
    print(f"\n{what}, n_prefix={base.n_prefix}, n_boot={base.n_boot}, {args.threads} threads, best of {args.repeats}")
    print(f"{'behaviour':10s} {'CPU s':>8s} {'wall s':>8s} {'capture s':>10s} {'prefix s':>9s} {'bootstrap s':>12s}")
    for name, r in best.items():
        print(f"{name:10s} {r['cpu_s']:8.2f} {r['wall_s']:8.2f} {r['capture_s']:10.2f} {r.get('prefix_s', 0.0):9.2f} "
              f"{r.get('behaviour_s', 0.0):12.3f}")
    print(f"ratio (with / without the behaviour), CPU time: {on['cpu_s'] / off['cpu_s']:.3f} "
          f"(wall, load-sensitive: {on['wall_s'] / off['wall_s']:.3f})")


if __name__ == "__main__":
    main()

"""Stage 1 of the data flow: measure one checkpoint.

The paper's instruments, applied to one Hugging Face model: the synthetic induction batch (`batch`), the adapter
table of architecture families (`families`), one nnsight pass that captures what the screen needs (`capture`), the
six-class selectivity screen (`positions`, `screen`) and its classification rules (`classify`), the participation
ratio (`spectral`), group ablations (`ablation`), what the model does at the query and in context (`behaviour`:
top-1, loss at B, ICL score, first-position norms, from the same passes), all driven by one configuration
(`config.ProbeConfig`) and assembled per head by `probe.probe_model`. Nothing here knows about panels, files or the
book. Modules are imported on demand: `positions`, `batch`, `classify`, `config` and `behaviour` do not import torch.
"""

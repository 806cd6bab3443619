"""Stage 3 of the data flow: the paper's findings over a developmental table, from any source, and the audit.

`devtable` indexes a table's revisions and counts heads per class; `findings` holds F1-F4, F6 and the threshold
sensitivity; `pr_lead` holds F5 (participation-ratio trajectories); `audit` (with its registry of `quantities`)
compares every numeric claim of the paper with the data; `reanalysis` writes them all as tables. Pure pandas/numpy:
nothing here imports torch.
"""

"""Stage 3 of the data flow: the paper's findings over a developmental table, from any source, and the audit.

`devtable` indexes a table's revisions and counts heads per class; `findings` is a package with one module per
finding (F1-F6, the threshold sensitivity, the refinement metrics, the seed replicas; `analysis.pr_lead` is the F5
module under its former name); `audit` (with its registry of `quantities`) compares every numeric claim of the
paper with the data; `reanalysis` writes them all as tables. Pure pandas/numpy: nothing here imports torch.
"""

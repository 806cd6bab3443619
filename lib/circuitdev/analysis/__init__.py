"""Stage 3 of the data flow: the paper's findings over a developmental table, from any source, and the audit.

`devtable` indexes a table's revisions and counts heads per class; `findings` is a package with one module per
finding (F1-F6, the threshold sensitivity, the refinement metrics, the seed replicas), each declaring its own
robustness claims; `claims` reads the paper's numbers and holds the rule that says when data reproduce one;
`audit` (with its registry of `quantities`) compares every numeric claim of the paper with the data; `reanalysis`
writes them all as tables. Pure pandas/numpy: nothing here imports torch.
"""

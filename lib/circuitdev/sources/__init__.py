"""Stage 2 of the data flow: everything that yields the developmental table.

Panels of training revisions (`panels`; a hub model's log-spaced revisions: `hub_revisions`), loading a revision
(`loading`), probing a panel's revisions and running the final-revision ablation (`run`), the stored per-revision
records (`store`; what their columns are: `record_format`), the per-panel tables computed revision by revision
(`panel_table`: `ablate`, `null_pr`), and the authors' published measurements (`published`, with `published_panels`,
`published_checks`, `published_topk`, `published_ablations`, and the pinned download manifest in `fetch`). Reading
records or published files never imports torch.
"""

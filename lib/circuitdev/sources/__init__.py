"""Stage 2 of the data flow: everything that yields the developmental table.

Panels of training revisions (`panels`), loading a revision (`loading`), probing a panel's revisions and running the
final-revision ablation (`run`), the stored per-revision records (`store`), and the authors' published measurements
(`published`, with the pinned download manifest in `fetch`). Reading records or published files never imports torch.
"""

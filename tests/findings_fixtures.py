"""What the per-finding tests (tests/test_f*.py, test_sensitivity.py, test_refinement.py, test_plots.py) share.

- fixture `dev`: the synthetic published fixture (published_fixtures.py, answers worked out by hand) as a
  developmental table; import it together with `published_fixture`, which it reads:
      from findings_fixtures import E, O, P, by_panel, dev  # noqa: F401  (pytest fixture)
      from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)
- `P`, `O`, `E`: its three panels; `by_panel(df, panel, column)`: one panel's column as a list;
- `dev_table(panel, ...)`: a synthetic record table in which sinks grow in layers >= 2 and one induction head forms,
  and `tiered((tier, table), ...)`: tiers built from such tables, for the figures;
- `assert_titled(fig)` / `assert_placeholder(fig, name)`: every figure says what it shows, or why it shows nothing.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from circuitdev.book.tiers import Tier, Tiers  # noqa: E402
from circuitdev.schema import HEAD_CLASSES, sel_column  # noqa: E402
from circuitdev.sources.published import load_published  # noqa: E402

P, O, E = "pythia-1b", "olmo-1b-0724", "olmoe-1b-7b-0924"
EMPTY = pd.DataFrame(columns=["tier", "panel"])  # what Tiers.apply gives when no tier has data


@pytest.fixture
def dev(published_fixture):
    return load_published(published_fixture).table


def by_panel(df, panel, column):
    return df.loc[df["panel"] == panel, column].tolist()


def dev_table(panel: str, revisions: int = 4, layers: int = 4, heads: int = 4, source: str = "toy",
              seed: int = 0) -> pd.DataFrame:
    """A synthetic developmental table in which sinks grow in layers >= 2 and one induction head forms."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(revisions):
        for layer in range(layers):
            for head in range(heads):
                sel = {sel_column(c): float(rng.uniform(0.5, 2.0)) for c in HEAD_CLASSES}
                if layer >= 2 and head <= r:
                    sel["sel_first_token"] = 40.0 + 10 * r
                if (layer, head) == (1, 0):
                    sel["sel_induction"] = 20.0 * (r + 1)
                rows.append({"panel": panel, "revision": f"step{r}", "tokens_b": (r + 1) * 1e-3, "step": r,
                             "layer": layer, "head": head, **sel, "pr": 1.0 + r + head, "source": source})
    return pd.DataFrame(rows)


def tiered(*tables: tuple[str, pd.DataFrame]) -> Tiers:
    return Tiers({name: Tier(name, t, configs={p: "abc" for p in t["panel"].unique()}) for name, t in tables})


def two_tiers() -> Tiers:
    """A toy and a measured tier of `dev_table`s, as the figure tests draw them."""
    return tiered(("toy", dev_table("toy-a")), ("measured", dev_table("real-b", seed=1, source="probe")))


def assert_titled(fig) -> None:
    assert isinstance(fig, Figure) and fig.axes
    assert all(ax.get_title() or fig._suptitle for ax in fig.axes if ax.axison)


def assert_placeholder(fig, name: str) -> None:
    assert not fig.axes[0].axison and fig.axes[0].texts, f"{name}: a placeholder says why"

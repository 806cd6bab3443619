"""What every finding shares: the class the sink findings count by default and the slack on fraction bars.

The table basics themselves (revisions in token order, head masks and counts, the final circuit) are
`circuitdev.analysis.devtable`; the interval machinery is `circuitdev.analysis.uncertainty`.
"""

from __future__ import annotations

from circuitdev.schema import HeadClass

__all__ = ["BOS"]

BOS: HeadClass = "first-token"  # the attention-sink (BOS) class: F1, F2 and the sensitivity sweep count it by default
EPS = 1e-9  # slack for ">=" on fractions such as 2/3

"""F5 lives in `circuitdev.analysis.findings.f5_pr_lead`; this name stays for the public API (`from
circuitdev.analysis import pr_lead`): it is that very module, not a copy."""

import sys

from circuitdev.analysis.findings import f5_pr_lead

sys.modules[__name__] = f5_pr_lead

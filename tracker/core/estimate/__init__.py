"""The estimator: from a ``config.json`` alone to parameters, memory, fits, cost,
structure and verifier findings, reproducing the reference page's rules.

Pure: no I/O, no clocks, no globals that change.  The tracker reruns it on every
revision whose config changed and compares the results with
:func:`compare_estimates`.
"""

from tracker.core.estimate.checkpoint import checkpoint_params, explain_mismatch
from tracker.core.estimate.compare import compare_estimates
from tracker.core.estimate.core import Estimate, estimate
from tracker.core.estimate.render import render_card

__all__ = ["Estimate", "estimate", "render_card", "checkpoint_params", "compare_estimates", "explain_mismatch"]

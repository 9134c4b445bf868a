"""Getting the news out: subscriptions, the outbox sender, Slack and Standard Webhooks, the SSRF guard.

Pure parts: :mod:`plan` (who hears of what, idempotency keys), :mod:`slack` (Block Kit),
:mod:`webhook` (signing), :mod:`text`. Edges: :mod:`guard` (DNS and the pinned HTTP client) and
:mod:`worker` (the sender). The outbox itself lives in the store (``tracker.adapters.store.delivery``).
"""

from tracker.adapters.delivery.guard import TargetGuard, TargetRefused
from tracker.adapters.delivery.plan import CATEGORIES, parse_categories, parse_target
from tracker.adapters.delivery.webhook import new_secret

__all__ = ["CATEGORIES", "TargetGuard", "TargetRefused", "new_secret", "parse_categories", "parse_target"]

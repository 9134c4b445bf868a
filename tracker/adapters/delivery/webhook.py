"""Generic webhooks, signed per the Standard Webhooks spec with the ``standardwebhooks`` package.

Body: ``{"type": "advisory.created" | "advisory.updated" | "advisory.withdrawn", "timestamp": ...,
"data": <the OSV record>}``. Headers: ``webhook-id`` (stable across retries: receivers de-duplicate
by it), ``webhook-timestamp`` (this attempt, in seconds) and ``webhook-signature``
(``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``). The body is the same bytes on every attempt.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A fresh signing secret in the spec's form: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def webhook_body(event_type: str, record: Mapping[str, Any], created_at: datetime) -> bytes:
    payload = {"type": event_type, "timestamp": created_at.isoformat().replace("+00:00", "Z"), "data": record}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def signed_headers(secret: str, webhook_id: str, body: bytes, now: datetime) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt at ``now`` (UTC)."""
    signature = Webhook(secret).sign(webhook_id, now, body.decode())
    return {"webhook-id": webhook_id, "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature, "Content-Type": "application/json"}

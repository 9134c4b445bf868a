"""The ten-line receiver in docs/delivery.md works against what the tracker sends."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from fastapi.testclient import TestClient

from tracker.adapters.delivery import new_secret
from tracker.adapters.delivery.webhook import signed_headers, webhook_body

DOC = Path(__file__).resolve().parents[2] / "docs" / "delivery.md"


def test_the_documented_receiver_verifies_and_deduplicates(capsys):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    secret = new_secret()
    namespace: dict = {}
    exec(code.replace('"whsec_..."', repr(secret)), namespace)  # our own documentation
    client = TestClient(namespace["app"])
    record = {"id": "x_HFUT-abcd-efgh-ijkl", "summary": "Upstream change"}
    body = webhook_body("advisory.created", record, datetime(2026, 12, 1, tzinfo=UTC))
    headers = signed_headers(secret, "msg_1", body, datetime.now(UTC))
    assert client.post("/hf", content=body, headers=headers).status_code == 200
    assert client.post("/hf", content=body, headers=headers).status_code == 200  # a retry: same webhook-id
    assert capsys.readouterr().out == "advisory.created x_HFUT-abcd-efgh-ijkl\n"
    forged = signed_headers(new_secret(), "msg_2", body, datetime.now(UTC))
    assert client.post("/hf", content=body, headers=forged).status_code == 400

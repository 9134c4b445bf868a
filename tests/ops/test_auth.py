"""Writes need a bearer token from `tracker token create`: none or a revoked one is 401, a valid one 2xx."""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from tests.ops.conftest import migrated
from tracker.adapters.settings import DeliverySettings
from tracker.surfaces.api import create_app

WRITES = [
    ("post", "/v1/watch", {"repo": "acme/new", "every": "2h", "check": False}, 201),
    ("delete", "/v1/watch/acme/new", None, 200),
    ("post", "/v1/subscriptions", {"target": "acme", "webhook": "http://127.0.0.1:9/hook?k=v", "min_severity": "high"},
     201),
    ("delete", "/v1/subscriptions/1", None, 200),
]


@pytest.fixture
def url(db_url):
    return migrated(db_url)


def send(client: TestClient, method: str, path: str, body, token: str | None = None):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return client.request(method.upper(), path, json=body, headers=headers)


def test_tokens_are_made_listed_and_revoked_and_stored_as_a_salted_hmac(cli, url):
    env = {"TRACKER_DATABASE_URL": url}
    made = cli("token", "create", "ci-bot", env=env)
    assert made.exit_code == 0
    token = made.stdout.strip()
    assert made.stdout == token + "\n"
    assert made.stderr == ("token 'ci-bot' created; it is shown only now: send it as "
                           "`Authorization: Bearer <token>`\n")
    prefix, key_id, secret = token.split("_", 2)
    assert (prefix, len(key_id), len(secret)) == ("trk", 12, 43)
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(text("select name, key_id, salt, digest from api_tokens")).one()
    engine.dispose()
    assert (row.name, row.key_id) == ("ci-bot", key_id)
    assert secret not in "".join(map(str, row))
    assert row.digest == hmac.new(bytes.fromhex(row.salt), secret.encode(), hashlib.sha256).hexdigest()
    assert len(row.salt) == 32
    again = cli("token", "create", "ci-bot", env=env)
    assert (again.exit_code, again.output) == (
        1, "error: a token named 'ci-bot' exists already: revoke it first, or choose another name\n")
    bad = cli("token", "create", "no spaces please", env=env)
    assert bad.exit_code == 2 and "invalid token name 'no spaces please'" in bad.output
    listed = cli("token", "list", env=env).output
    assert re.fullmatch(rf"ci-bot {{25}}trk_{key_id}_…  created \d{{4}}-\d\d-\d\d \d\d:\d\d  last used never\n",
                        listed), listed  # times in a listing: to the minute
    assert cli("token", "revoke", "ci-bot", env=env).output == "revoked ci-bot\n"
    gone = cli("token", "revoke", "ci-bot", env=env)
    assert (gone.exit_code, gone.output) == (1, "error: no token named 'ci-bot'\n")
    assert cli("token", "list", env=env).output == "no tokens; make one with `tracker token create NAME`\n"


def test_writes_need_a_valid_token(cli, url, settings, make):
    env = {"TRACKER_DATABASE_URL": url}
    token = cli("token", "create", "admin", env=env).stdout.strip()
    other = cli("token", "create", "other", env=env).stdout.strip()
    tracker = make(settings, database={"url": url}, delivery=DeliverySettings(allow_hosts=("127.0.0.1",)))
    client = TestClient(create_app(tracker))
    for method, path, body, _ in WRITES:
        for given in (None, "nonsense", token[:-1] + ("A" if token[-1] != "A" else "B"), "trk_000000000000_" + "x" * 43):
            answer = send(client, method, path, body, given)
            assert answer.status_code == 401, (method, path, given, answer.text)
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.json()["code"] == 16
    answer = send(client, "post", "/v1/watch", {"repo": "acme/new"})
    assert answer.json() == {"code": 16, "message": "this needs a bearer token: make one with `tracker token create NAME`"}
    answer = send(client, "post", "/v1/watch", {"repo": "acme/new"}, "nonsense")
    assert answer.json() == {"code": 16, "message": "invalid or revoked token"}
    assert tracker.store.repos.all() == [] and tracker.store.outbox.list_subscriptions() == []
    answers = [send(client, method, path, body, token) for method, path, body, _ in WRITES]
    assert [a.status_code for a in answers] == [status for *_, status in WRITES], [a.text for a in answers]
    assert answers[0].json() == {"repo": "acme/new", "branch": "main", "every_seconds": 7200.0, "created": True}
    assert answers[1].json() == {"removed": "acme/new"}
    subscription = answers[2].json()
    assert subscription["secret"].startswith("whsec_")
    assert {k: subscription[k] for k in ("id", "target", "kind", "url", "min_severity", "categories")} == {
        "id": 1, "target": "acme", "kind": "webhook", "url": "http://127.0.0.1:9/hook", "min_severity": "high",
        "categories": []}
    assert answers[3].json() == {"removed": 1, "dropped": 0}
    assert "last used 20" in cli("token", "list", env=env).output.splitlines()[0]  # admin
    # Revoked: refused from the next request on; the other token still works.
    assert cli("token", "revoke", "admin", env=env).exit_code == 0
    for method, path, body, _ in WRITES:
        assert send(client, method, path, body, token).status_code == 401
    assert send(client, "post", "/v1/watch", {"repo": "acme/again", "check": False}, other).status_code == 201


def test_bad_writes_with_a_token_are_400(cli, url, settings, make):
    token = cli("token", "create", "admin", env={"TRACKER_DATABASE_URL": url}).stdout.strip()
    client = TestClient(create_app(make(settings, database={"url": url})))
    cases = [
        ("post", "/v1/watch", {"repo": "gpt2"}, "invalid repo id 'gpt2': expected exactly one '/' as in 'owner/name'"),
        ("post", "/v1/watch", {"repo": "acme/a", "every": "1s"},
         "invalid duration '1s': shorter than the minimum of 1m (a poll interval is between 1m and 31d)"),
        ("post", "/v1/subscriptions", {"target": "*"}, "give exactly one of slack or webhook"),
        ("post", "/v1/subscriptions", {"target": "*", "webhook": "http://127.0.0.1:9/x"}, None),
        ("post", "/v1/subscriptions", {"target": "*", "slack": "https://x.example/y", "categories": ["nope"]},
         "unknown category 'nope'"),
    ]
    for method, path, body, message in cases:
        answer = send(client, method, path, body, token)
        assert answer.status_code == 400, answer.text
        if message:
            assert message in answer.json()["message"]
    assert send(client, "delete", "/v1/watch/acme/none", None, token).json() == {
        "code": 5, "message": "not watched: acme/none"}
    assert send(client, "delete", "/v1/subscriptions/99", None, token).status_code == 404


def test_reads_are_open_by_default_and_can_require_a_token(cli, url, settings, make):
    token = cli("token", "create", "reader", env={"TRACKER_DATABASE_URL": url}).stdout.strip()
    open_client = TestClient(create_app(make(settings, database={"url": url})))
    assert open_client.get("/v1/repos").status_code == 200
    assert open_client.get("/metrics").status_code == 200
    closed = TestClient(create_app(make(settings, database={"url": url}, api={"read_requires_token": True})))
    for path in ("/v1/repos", "/metrics", "/v1/vulns/UPT-1", "/feeds/all.atom"):
        answer = closed.get(path)
        assert (answer.status_code, answer.json()["code"]) == (401, 16), path
        assert closed.get(path, headers={"Authorization": "Bearer nonsense"}).status_code == 401
    assert closed.post("/v1/query", json={"commit": "0" * 40}).status_code == 401
    assert closed.get("/v1/repos", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    unread = closed.post("/v1/query", json={"commit": "0" * 40}, headers={"Authorization": f"Bearer {token}"})
    assert (unread.status_code, unread.json()["code"]) == (404, 5)  # read, and answered: never {} for "unknown"
    for path in ("/healthz", "/readyz", "/openapi.json"):
        assert closed.get(path).status_code == 200, path


def test_the_setting_is_read_from_the_config(tmp_path):
    from tracker.adapters.settings import load_settings
    from tracker.core.errors import ConfigError

    (tmp_path / "t.toml").write_text("[api]\nread_requires_token = true\n")
    assert load_settings(tmp_path / "t.toml", env={}).api.read_requires_token is True
    assert load_settings(None, env={}).api.read_requires_token is False
    (tmp_path / "bad.toml").write_text('[api]\nread_requires_token = "yes"\n')
    with pytest.raises(ConfigError, match=r": \[api\] read_requires_token: must be true or false, not 'yes'$"):
        load_settings(tmp_path / "bad.toml", env={})

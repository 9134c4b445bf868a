"""Hub webhooks: a signed-by-secret delivery makes the tracker poll the repo at once."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.core.conftest import config_json
from tracker.core.model import RepoId
from tracker.surfaces.api import create_app

REPO = RepoId("acme/hooked-model")
SECRET = "s3cret-shared-with-the-hub"


def payload(name=REPO, scope="repo.content", type_="model"):
    return {"event": {"action": "update", "scope": scope},
            "repo": {"type": type_, "name": name, "headSha": "0" * 40},
            "webhook": {"id": "6390", "version": 3}}


def test_a_webhook_triggers_a_poll_and_bad_deliveries_are_refused(hub_standin, settings, make):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json()})
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    new = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=1000)})
    polled: list[str] = []
    client = TestClient(create_app(tracker, webhook_secret=SECRET,
                                   poll_soon=lambda repo: polled.append(tracker.poll_repo(repo).line())))

    assert client.post("/hooks/hub", json=payload(), headers={"X-Webhook-Secret": "wrong"}).json() == {
        "code": 16, "message": "invalid webhook secret"}
    assert client.post("/hooks/hub", json=payload()).status_code == 401
    assert polled == []

    answer = client.post("/hooks/hub", json=payload(), headers={"X-Webhook-Secret": SECRET})
    assert (answer.status_code, answer.json()) == (202, {"status": "queued", "repo": REPO})
    assert polled == [f"{REPO}: new, 1 new revision(s), 1 analysed"]
    assert tracker.store.repos.get(REPO).last_seen_sha == new

    ignored = client.post("/hooks/hub", json=payload(name="acme/other"), headers={"X-Webhook-Secret": SECRET})
    assert ignored.json() == {"status": "ignored", "reason": "acme/other is not watched"}
    ignored = client.post("/hooks/hub", json=payload(type_="dataset"), headers={"X-Webhook-Secret": SECRET})
    assert ignored.json()["status"] == "ignored"
    bad = client.post("/hooks/hub", json=payload(name="../etc"), headers={"X-Webhook-Secret": SECRET})
    assert bad.status_code == 400
    assert len(polled) == 1


def test_webhooks_are_off_without_a_secret(hub_standin, settings, make):
    tracker = make(settings)
    client = TestClient(create_app(tracker))
    answer = client.post("/hooks/hub", json=payload(), headers={"X-Webhook-Secret": ""})
    assert answer.status_code == 404


def test_the_webhook_secret_defaults_to_the_settings_and_none_turns_the_hooks_off(hub_standin, settings, make):
    tracker = make(settings, hub={"webhook_secret": SECRET})
    on = TestClient(create_app(tracker)).post("/hooks/hub", json=payload(), headers={"X-Webhook-Secret": SECRET})
    assert (on.status_code, on.json()) == (200, {"status": "ignored", "reason": f"{REPO} is not watched"})
    off = TestClient(create_app(tracker, webhook_secret=None)).post("/hooks/hub", json=payload(),
                                                                   headers={"X-Webhook-Secret": SECRET})
    assert off.status_code == 404

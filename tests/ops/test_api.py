"""The one app: /metrics after a scripted poll, /readyz, the repo reads (watched or not) and their errors."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from hubstandin import HubStandin
from prometheus_client.parser import text_string_to_metric_families

from tests.core.conftest import config_json
from tests.delivery.conftest import Receiver
from tests.ops.conftest import migrated
from tracker.adapters.delivery.worker import DeliveryWorker
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import DeliverySettings, Settings
from tracker.app import make_tracker
from tracker.surfaces.api import create_app

REPO = "acme/chat-model"


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text) for s in family.samples}


def delta(before, after, name: str, label: str | None = None) -> dict[str, float]:
    """How much each series of ``name`` moved, by the value of ``label``; series that did not move left out."""
    out = {}
    for (metric, labels), value in after.items():
        if metric != name:
            continue
        moved = value - before.get((metric, labels), 0.0)
        if moved:
            out[dict(labels).get(label, "") if label else ""] = moved
    return out


def test_metrics_after_a_scripted_poll_and_deliveries(hub_standin, settings, make, db_url):
    fast = DeliverySettings(max_attempts=3, backoff_base=0.01, backoff_max=0.02, timeout=2.0,
                            allow_hosts=("127.0.0.1",))
    tracker = make(settings.changed(delivery=fast, database={"url": migrated(db_url)}))
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 2}'})
    tracker.store.repos.add(REPO, now=tracker.clock())
    receiver = Receiver(script=[500]).start()  # the first attempt fails, the retry is delivered
    client = TestClient(create_app(tracker))
    token = tracker.store.tokens.create("ci", now=tracker.clock())
    subscribed = client.post("/v1/subscriptions", json={"target": "*", "webhook": receiver.url},
                             headers={"Authorization": f"Bearer {token}"})
    assert subscribed.status_code == 201, subscribed.text
    try:
        before = scrape(client)
        hub_standin.clear_log()
        assert [r.status.value for r in tracker.poll()] == ["baseline"]
        hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": 3}'}, message="new eos")
        assert [r.status.value for r in tracker.poll()] == ["new"]
        hub_answers = Counter(str(r.status) for r in hub_standin.requests)
        worker = DeliveryWorker(tracker.store.outbox, fast)
        assert worker.run_once() == 1  # HTTP 500: retried
        time.sleep(0.05)
        assert worker.run_once() == 1  # delivered
        worker.stop()
        after = scrape(client)
    finally:
        receiver.stop()
    assert delta(before, after, "tracker_polls_total", "outcome") == {"baseline": 1, "new": 1}
    assert delta(before, after, "tracker_hub_requests_total", "status") == dict(hub_answers)
    assert sum(hub_answers.values()) > 5
    assert delta(before, after, "tracker_revisions_read_total") == {"": 2}
    stored = Counter(f.severity.value for r in tracker.store.revisions.of_repo(tracker.repo(REPO).pk)
                     for f in r.findings or ())
    assert delta(before, after, "tracker_findings_total", "severity") == dict(stored)
    assert stored["high"] >= 1
    raised = Counter(a.severity for a in tracker.store.advisories.find())
    assert dict(raised) == {"high": 1}
    assert delta(before, after, "tracker_advisories_total", "severity") == {"high": 1}
    assert delta(before, after, "tracker_deliveries_total", "outcome") == {"retry": 1, "delivered": 1}
    assert delta(before, after, "tracker_poll_lag_seconds_count") == {"": 1}  # the baseline is not a lag
    assert after[("tracker_repos_watched", ())] == 1
    assert after[("tracker_revisions_pending", ())] == 0
    assert after[("tracker_deliveries_pending", ())] == 0
    assert after[("tracker_deliveries_dead", ())] == 0
    assert after[("tracker_database_up", ())] == 1
    assert [r.answered for r in receiver.got] == [500, 200]


# -- readiness ---------------------------------------------------------------------------------------------


def test_readyz_in_tracker_serve_checks_the_database_only(settings, make):
    client = TestClient(create_app(make(settings)))
    assert client.get("/healthz").json() == {"status": "ok"}
    answer = client.get("/readyz")
    assert (answer.status_code, answer.json()) == (200, {"status": "ready", "checks": {
        "database": "ok", "hub": "serving", "scheduler": "none in this process (tracker serve): only the database is checked"}})


def test_readyz_in_tracker_run_needs_the_scheduler(settings, make):
    running = [True]
    client = TestClient(create_app(make(settings), scheduler_running=lambda: running[0]))
    assert client.get("/readyz").json() == {"status": "ready", "checks": {"database": "ok", "hub": "serving", "scheduler": "running"}}
    running[0] = False
    answer = client.get("/readyz")
    assert (answer.status_code, answer.json()) == (503, {"status": "not ready", "checks": {
        "database": "ok", "hub": "serving", "scheduler": "stopped"}})


def test_readyz_when_the_database_is_gone(settings, make, tmp_path):
    folder = tmp_path / "db"
    folder.mkdir()
    tracker = make(settings, database={"url": f"sqlite:///{folder}/t.sqlite3"})
    client = TestClient(create_app(tracker, scheduler_running=lambda: True), raise_server_exceptions=False)
    tracker.store.db.engine.dispose()
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    answer = client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json() == {"status": "not ready", "checks": {
        "database": "cannot open the database: the folder does not exist or is not writable",  # where: logged
        "scheduler": "running"}}
    assert scrape(client)[("tracker_database_up", ())] == 0


# -- repo reads --------------------------------------------------------------------------------------------


def push_history(hub_standin: HubStandin) -> list[str]:
    hub_standin.create_repo(REPO)
    first = hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 2}'},
                               message="initial")
    second = hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": 3}'}, message="new eos")
    return [first, second]


@pytest.fixture
def history(hub_standin, settings, make):
    shas = push_history(hub_standin)
    tracker = make(settings)
    return tracker, TestClient(create_app(tracker)), shas


@pytest.fixture(scope="module")
def unwatched_history(tmp_path_factory):
    """The same history, nothing watched, once for the module: for the tests that only read through the API."""
    tmp_path = tmp_path_factory.mktemp("unwatched")
    hub_standin = HubStandin(tmp_path / "hub").start()
    try:
        shas = push_history(hub_standin)
        settings = Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                            hub={"endpoint": hub_standin.url, "timeout": 30.0})
        hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout,
                        max_retries=settings.hub.max_retries,
                        max_wait=settings.hub.max_wait, sleep=lambda _s: None)
        tracker = make_tracker(settings, hub=hub)
        try:
            yield tracker, TestClient(create_app(tracker)), shas
        finally:
            tracker.close()
    finally:
        hub_standin.stop(wait=False)


def test_repos_and_revisions_of_a_watched_repo(history):
    tracker, client, (first, second) = history
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll(backfill=1)
    repos = client.get("/v1/repos").json()["repos"]
    assert [(r["repo"], r["branch"], r["state"], r["last_seen_sha"]) for r in repos] == [
        (REPO, "main", "active", second)]
    answer = client.get(f"/v1/repos/{REPO}/revisions").json()
    assert (answer["repo"], answer["watched"]) == (REPO, True)
    revisions = answer["revisions"]
    assert [(r["sha"], r["title"], r["status"], r["baseline"]) for r in revisions] == [
        (first, "initial", "done", True), (second, "new eos", "done", False)]
    assert revisions[1]["worst_severity"] == "high"
    assert revisions[1]["files"] == {"added": [], "removed": [], "changed": ["generation_config.json"]}
    assert revisions[1]["top_findings"][0]["code"] == "generation.eos_token_id_changed"


def test_reads_of_a_repo_that_is_not_watched_come_from_the_hub_and_store_nothing(history):
    tracker, client, (first, second) = history
    answer = client.get(f"/v1/repos/{REPO}/revisions", params={"limit": 5}).json()
    assert answer["watched"] is False
    assert [(r["sha"], r["title"], r["status"], r["parent"]) for r in answer["revisions"]] == [
        (first, "initial", "not_read", None), (second, "new eos", "not_read", first)]
    diff = client.get(f"/v1/repos/{REPO}/diff", params={"from": first, "to": "main"})
    assert diff.status_code == 200, diff.text
    body = diff.json()
    assert (body["repo"], body["from"], body["to"]) == (REPO, first, second)
    assert [c["path"] for c in body["files"]["changed"]] == ["generation_config.json"]
    assert "generation.eos_token_id_changed" in [f["code"] for f in body["findings"]]
    estimate = client.get(f"/v1/repos/{REPO}/estimate", params={"revision": first})
    assert estimate.status_code == 200, estimate.text
    assert estimate.json()["model_type"] == "bert"
    assert tracker.store.repos.all() == []


@pytest.mark.parametrize(("path", "params", "status", "message"), [
    # the same message as `tracker revisions acme/nope` (one service lists a repo that is not watched)
    ("/v1/repos/acme/nope/revisions", {}, 404, "acme/nope is not watched, and not found on the Hub (check the id; "
                                               "private and gated repos need HF_TOKEN)"),
    ("/v1/repos/acme/nope/estimate", {}, 404, "repository not found"),
    (f"/v1/repos/{REPO}/diff", {"from": "0" * 40, "to": "main"}, 404, "Revision Not Found for url: "),
    (f"/v1/repos/{REPO}/diff", {"from": "a b", "to": "main"}, 400,
     "invalid from: a commit id, branch or tag without spaces or control characters"),
    ("/v1/repos/acme/a..b/revisions", {}, 400, "invalid repo id 'acme/a..b'"),
    (f"/v1/repos/{REPO}/revisions", {"limit": 0}, 400, "invalid request"),
])
def test_read_errors_are_clear_answers_never_500(unwatched_history, path, params, status, message):
    _, client, _ = unwatched_history
    answer = client.get(path, params=params)
    assert answer.status_code == status, answer.text
    assert answer.json()["code"] == {400: 3, 404: 5}[status]
    assert message in answer.json()["message"]
    assert "\n" not in answer.json()["message"]


def test_a_hub_that_is_down_is_503(settings, make, hub_standin):
    tracker = make(settings, hub={"max_retries": 0})
    hub_standin.faults.add("/api/models/", status=502, times=None)
    answer = TestClient(create_app(tracker)).get("/v1/repos/acme/any/revisions")
    assert answer.status_code == 503
    assert answer.json()["code"] == 14
    assert answer.json()["message"].endswith(": HTTP 502 (after 0 retries)")

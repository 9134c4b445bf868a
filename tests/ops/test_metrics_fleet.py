"""/metrics reports the fleet from the database at scrape time: a replica that never polled (tracker serve)
shows the revisions another process read. And the exposition passes Prometheus's own checker (promtool)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hubstandin import HubStandin
from prometheus_client.parser import text_string_to_metric_families

from tests.clocks import ManualClock
from tests.core.conftest import config_json
from tracker.adapters import metrics
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.surfaces.api import create_app
from tracker.surfaces.cli import main

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/fleet-model"


@pytest.fixture(scope="module")
def polled_elsewhere(tmp_path_factory):
    """Two revisions of REPO read by `tracker poll` in another process; a serving app on the same database.

    Once for the module: its tests only read /metrics."""
    tmp_path = tmp_path_factory.mktemp("fleet")
    hub_standin = HubStandin(tmp_path / "hub").start()
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 2}'})
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 30.0})
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": settings.database.url,
           "TRACKER_CONFIG": str(tmp_path / "t.toml")}
    (tmp_path / "t.toml").write_text("")

    def tracker(*args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "tracker", *args], env={**os.environ, **env,
                              "PYTHONPATH": str(ROOT)}, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    try:
        added = CliRunner().invoke(main, ["watch", "add", REPO], env=env, catch_exceptions=False)
        assert added.exit_code == 0, added.output
        tracker("poll")
        hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 3}'})
        tracker("poll")
        served = make_tracker(settings, hub=HubClient(settings.hub.endpoint, timeout=settings.hub.timeout,
                                                      max_retries=0, max_wait=0.0, sleep=lambda _s: None))
        try:
            yield served, TestClient(create_app(served))
        finally:
            served.close()
    finally:
        hub_standin.stop(wait=False)


def test_a_serving_replica_reports_what_another_process_read(polled_elsewhere):
    served, client = polled_elsewhere
    answer = client.get("/metrics")
    assert answer.status_code == 200
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(answer.text) for s in family.samples}
    assert samples[("tracker_revisions", ())] == 2
    assert samples[("tracker_revisions_pending", ())] == 0
    assert samples[("tracker_revisions_pending_oldest_age_seconds", ())] == 0
    live = Counter(a.severity for a in served.store.advisories.find() if not a.withdrawn)
    assert sum(live.values()) >= 1
    assert {sev: samples[("tracker_advisories_live", (("severity", sev),))]
            for sev in ("critical", "high", "moderate", "low", "info")} == {
        sev: live.get(sev, 0) for sev in ("critical", "high", "moderate", "low", "info")}
    assert samples[("tracker_deliveries_pending", ())] == 0 and samples[("tracker_deliveries_dead", ())] == 0


def samples_of(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def three_repos(hub_standin, settings, sleeps):
    """acme/steady (polled fine twice), acme/broken (fine, then a commit the Hub answers 500 about), acme/never
    (not on the Hub),
    all watched at T0; polled at T0+1m and T0+1h; the clock then stands at T0+3h."""
    t0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    clock = ManualClock(t0)
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, max_retries=settings.hub.max_retries,
                    max_wait=settings.hub.max_wait, sleep=sleeps)
    tracker = make_tracker(settings, hub=hub, clock=clock)
    for repo in ("acme/steady", "acme/broken"):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json()})
    for repo in ("acme/steady", "acme/broken", "acme/never"):
        tracker.store.repos.add(repo, now=t0)
    clock.now = t0 + timedelta(minutes=1)
    first = {r.repo: r.status.value for r in tracker.poll()}
    assert first == {"acme/broken": "baseline", "acme/never": "not_found", "acme/steady": "baseline"}
    hub_standin.commit("acme/broken", {"config.json": config_json(hidden_size=768)})  # to be read, and fail
    hub_standin.faults.add("acme/broken", status=500, times=None)
    clock.now = t0 + timedelta(hours=1)
    second = {r.repo: r.status.value for r in tracker.poll()}
    assert second == {"acme/broken": "error", "acme/never": "not_found", "acme/steady": "unchanged"}
    clock.now = t0 + timedelta(hours=3)
    yield TestClient(create_app(tracker))
    tracker.store.close()


def test_each_repo_s_time_since_its_last_successful_poll(three_repos):
    samples = samples_of(three_repos.get("/metrics").text)
    ages = {labels[0][1]: value for (name, labels), value in samples.items()
            if name == "tracker_repo_last_success_age_seconds"}
    # steady: its unchanged poll at T0+1h; broken: its baseline at T0+1m (the failed poll does not count);
    # never: no success yet, counted from when it was watched.
    assert ages == {"acme/steady": 2 * 3600, "acme/broken": 3 * 3600 - 60, "acme/never": 3 * 3600}
    assert samples[("tracker_repo_last_success_age_omitted", ())] == 0
    assert samples[("tracker_repos_watched", ())] == 3


def test_the_per_repo_series_are_bounded_to_the_stalest(three_repos, monkeypatch):
    monkeypatch.setattr(metrics, "MAX_REPO_SERIES", 2)
    samples = samples_of(three_repos.get("/metrics").text)
    ages = {labels[0][1]: value for (name, labels), value in samples.items()
            if name == "tracker_repo_last_success_age_seconds"}
    assert ages == {"acme/never": 3 * 3600, "acme/broken": 3 * 3600 - 60}
    assert samples[("tracker_repo_last_success_age_omitted", ())] == 1
    assert samples[("tracker_repos_watched", ())] == 3


def test_the_exposition_passes_promtool(polled_elsewhere):
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("TRACKER_TEST_PROMTOOL_REQUIRED"):
            pytest.fail("TRACKER_TEST_PROMTOOL_REQUIRED is set but promtool is not installed (Debian: prometheus)")
        pytest.skip("promtool not installed (Debian's prometheus package)")
    _, client = polled_elsewhere
    text = client.get("/metrics").text
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")

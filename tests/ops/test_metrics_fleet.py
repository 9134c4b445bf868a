"""/metrics reports the fleet from the database at scrape time: a replica that never polled (tracker serve)
shows the revisions another process read. And the exposition passes Prometheus's own checker (promtool)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.core.conftest import config_json
from tracker.surfaces.api import create_app

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/fleet-model"


@pytest.fixture
def polled_elsewhere(hub_standin, settings, make, tmp_path):
    """Two revisions of REPO read by `tracker poll` in another process; a serving app on the same database."""
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 2}'})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_ENDPOINT": hub_standin.url,
           "TRACKER_DATABASE_URL": settings.database_url, "TRACKER_CONFIG": str(tmp_path / "t.toml")}
    (tmp_path / "t.toml").write_text("")

    def tracker(*args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "tracker", *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    tracker("watch", "add", REPO)
    tracker("poll")
    hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 3}'})
    tracker("poll")
    served = make(settings)
    return served, TestClient(create_app(served))


def test_a_serving_replica_reports_what_another_process_read(polled_elsewhere):
    served, client = polled_elsewhere
    answer = client.get("/metrics")
    assert answer.status_code == 200
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(answer.text) for s in family.samples}
    assert samples[("tracker_revisions", ())] == 2
    assert samples[("tracker_revisions_pending", ())] == 0
    assert samples[("tracker_revisions_pending_oldest_age_seconds", ())] == 0
    live = Counter(a.severity for a in served.store.advisories_for() if not a.withdrawn)
    assert sum(live.values()) >= 1
    assert {sev: samples[("tracker_advisories_live", (("severity", sev),))]
            for sev in ("critical", "high", "moderate", "low", "info")} == {
        sev: live.get(sev, 0) for sev in ("critical", "high", "moderate", "low", "info")}
    assert samples[("tracker_deliveries_pending", ())] == 0 and samples[("tracker_deliveries_dead", ())] == 0


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

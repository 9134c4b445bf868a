"""`tracker poll` checks watched repos by the Hub-wide change listing: requests by change, not by repo.

200 watched repos with distinct owners among 600 models on the stand-in (copies of one template
commit, ``hubstandin.bulk``; 200 a listing page, so a walk through them all takes 3 pages as 3,000
would on the Hub), read once; then 10 of them change. The second
``tracker poll`` reads the 10 new revisions, and every request that is not about those 10 repos
is counted at the stand-in. The listing faults the stand-in can throw (a page that fails,
repeats or skips) end with the same revisions as a clean run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hubstandin import HubStandin
from hubstandin.bulk import copy_template, many_repos_standin

from tests.core.conftest import config_json
from tracker.adapters.store import open_store
from tracker.adapters.store.tables import hub_listing
from tracker.surfaces.cli import main

WATCHED = [f"owner{i:04d}/model" for i in range(200)]
UNWATCHED = [f"other{i:04d}/model" for i in range(400)]
CHANGED = WATCHED[::20]  # 10 repos
PAGE = 200  # models a listing page holds (the Hub's 1,000, scaled as the fleet is)
START = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def repo_of(path: str) -> str | None:
    """The repo a stand-in request is about (None: the Hub-wide listing, or an owner listing)."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if parts[:2] == ["api", "models"]:
        return "/".join(parts[2:4]) if len(parts) >= 4 else None
    return "/".join(parts[:2]) if len(parts) >= 2 else None


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[HubStandin]:
    root = tmp_path_factory.mktemp("hub")
    copy_template(root, WATCHED + UNWATCHED, {"config.json": config_json()}, date=START)
    with many_repos_standin(root, models_page_size=PAGE) as standin:
        yield standin


class Cli:
    """The real `tracker` command in-process, on its own SQLite file, against ``hub``."""

    def __init__(self, hub: HubStandin, workdir: Path) -> None:
        workdir.mkdir(exist_ok=True)
        (workdir / "tracker.toml").write_text(
            "[hub]\nbudget_api_per_5min = 1000000\nbudget_resolvers_per_5min = 1000000\n")
        self.url = f"sqlite:///{workdir}/t.sqlite3"
        self.env = {"HF_ENDPOINT": hub.url, "TRACKER_DATABASE_URL": self.url,
                    "TRACKER_CONFIG": str(workdir / "tracker.toml")}

    def __call__(self, *args: str):
        return CliRunner().invoke(main, list(args), env=self.env, catch_exceptions=False)


@pytest.fixture(scope="module")
def first_read(hub, tmp_path_factory):
    """A tracker that has read all 200 watched repos once, then 10 of them changed upstream."""
    workdir = tmp_path_factory.mktemp("tracker")
    cli = Cli(hub, workdir)
    (workdir / "watch.txt").write_text("\n".join(WATCHED) + "\n")
    assert cli("watch", "add", "--from", str(workdir / "watch.txt")).exit_code == 0
    first = cli("poll")
    assert first.exit_code == 0, first.output
    assert first.output.splitlines()[-1] == "polled 200 repos: 200 with new revisions, 0 failed"
    new = {}
    for n, repo in enumerate(CHANGED):
        new[repo] = hub.commit(repo, {"config.json": config_json(vocab_size=1000 + n)}, message="resize",
                               date=START + dt.timedelta(hours=1, minutes=n))
    return cli, new


@pytest.mark.slow
@pytest.mark.timeout(900)  # the fixture reads 200 repos once (about a minute on a busy 2-core machine)
def test_a_poll_reads_the_ten_changed_repos_and_costs_under_a_twentieth_of_a_request_per_repo(hub, first_read):
    cli, new = first_read
    hub.clear_log()
    result = cli("poll")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == "polled 200 repos: 10 with new revisions, 0 failed"
    assert sorted(line for line in lines if "new revision" in line and not line.startswith("polled")) == [
        f"{repo}: new, 1 new revision(s), 1 analysed" for repo in sorted(CHANGED)]
    store = open_store(cli.url)
    try:
        for repo, sha in new.items():
            row = store.repos.get(repo)
            assert row is not None and row.last_seen_sha == sha
            assert store.revisions.get(row.pk, sha).status == "done"
        with store.db.engine.connect() as conn:
            listing = conn.execute(hub_listing.select()).one()
    finally:
        store.close()
    # The watermarks are the Hub's clock (the stand-in's dates), never ours.
    assert listing.epoch == 1
    assert [m["top"] for m in listing.marks] == ["2026-03-01T00:00:00+00:00", "2026-03-01T01:09:00+00:00"]
    requests = hub.requests
    about_others = [r for r in requests if repo_of(r.path) not in CHANGED]
    assert all(r.path == "/api/models" and "sort=lastModified" in r.query for r in about_others), about_others[:5]
    assert len(about_others) / len(WATCHED) < 0.05
    # Every model of the stand-in was last modified at the same moment, the first poll's watermark,
    # so the walk reads through all 600 (3 pages of 200) to be sure none is newer.
    assert len(about_others) == 3


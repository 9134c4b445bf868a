"""Repo ids and poll intervals are validated exactly, through the real command line, before the Hub is asked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hubstandin import HubStandin

from tracker.adapters.settings import load_settings
from tracker.core.errors import ConfigError
from tracker.surfaces.cli import main

Invoke = Callable[..., Result]


@pytest.fixture
def cli(hub_standin: HubStandin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tracker.toml").write_text('[poll]\nevery = "2h"\n')
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3",
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml")}

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    return invoke


@pytest.mark.parametrize("bad", ["acme/tiny\n", "acme/tiny ", "acme/tiny\t", " acme/tiny", "acme/tiny\r\n"])
def test_a_repo_id_with_trailing_or_leading_whitespace_is_refused(cli: Invoke, hub_standin: HubStandin,
                                                                  bad: str) -> None:
    result = cli("watch", "add", bad)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: invalid repo id {bad!r}: each part must be 1-96 letters, digits, '-', '_' or '.', not start "
        "or end with '-' or '.', and not contain '--' or '..'",
        "nothing added: fix the ids above and run again",
    ]
    assert json.loads(cli("watch", "list", "--json").output) == []
    assert hub_standin.requests == []


@pytest.mark.parametrize(
    ("every", "error"),
    [
        ("1ms", "Error: invalid duration '1ms': shorter than the minimum of 1m (a poll interval is between 1m and 31d)"),
        ("59s", "Error: invalid duration '59s': shorter than the minimum of 1m (a poll interval is between 1m and 31d)"),
        ("99999999999999999999d", "Error: invalid duration '99999999999999999999d': longer than the maximum of 31d "
                                  "(a poll interval is between 1m and 31d)"),
        ("32d", "Error: invalid duration '32d': longer than the maximum of 31d (a poll interval is between 1m and 31d)"),
        ("9" * 400 + "s", f"Error: invalid duration '{'9' * 40}'...: longer than the maximum of 31d "
                          "(a poll interval is between 1m and 31d)"),
        ("soon", "Error: invalid duration 'soon': use e.g. 90s, 15m, 1h30m, 2d (a poll interval is between 1m and 31d)"),
    ],
)
def test_every_outside_its_bounds_is_refused_with_one_line(cli: Invoke, hub_standin: HubStandin, every: str,
                                                           error: str) -> None:
    result = cli("watch", "add", "acme/tiny", "--every", every)
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("Error")] == [error]
    assert "Traceback" not in result.output
    assert json.loads(cli("watch", "list", "--json").output) == []
    assert hub_standin.requests == []


def test_every_at_its_bounds_is_accepted(cli: Invoke) -> None:
    assert cli("watch", "add", "acme/a", "--every", "1m", "--no-check").output == "watching acme/a (main, every 1m)\n"
    assert cli("watch", "add", "acme/b", "--every", "31d", "--no-check").output == "watching acme/b (main, every 31d)\n"


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ('[poll]\nevery = "1ms"\n',
         "[poll] every: invalid duration '1ms': shorter than the minimum of 1m (a poll interval is between 1m and 31d)"),
        ('[[watch]]\nrepo = "acme/a"\nevery = "99999999999999999999d"\n',
         "[[watch]] #1 every: invalid duration '99999999999999999999d': longer than the maximum of 31d "
         "(a poll interval is between 1m and 31d)"),
        ("[poll]\nevery = inf\n", "[poll] every: invalid duration inf: longer than the maximum of 31d "
                                  "(a poll interval is between 1m and 31d)"),
        ("[poll]\nevery = nan\n", "[poll] every: invalid duration nan: longer than the maximum of 31d "
                                  "(a poll interval is between 1m and 31d)"),
        ('[[watch]]\nrepo = "acme/a\\n"\n', "[[watch]] #1 repo: invalid repo id 'acme/a\\n': each part must be 1-96 letters, digits, "
                                            "'-', '_' or '.', not start or end with '-' or '.', and not contain "
                                            "'--' or '..'"),
        ('[hub]\nmax_defer = "32d"\n', "[hub] max_defer: invalid duration '32d': longer than the maximum of 31d"),
        ('[hub]\ntimeout = "99999999999999999999d"\n',
         "[hub] timeout: invalid duration '99999999999999999999d': longer than the maximum of 3650d"),
        ("[hub]\nmax_pages = 0\n", "[hub] max_pages: must be a whole number, at least 1, not 0"),
        ("[hub]\nmax_api_bytes = true\n", "[hub] max_api_bytes: must be a whole number, at least 1, not True"),
    ],
)
def test_config_values_outside_their_bounds_are_refused(tmp_path: Path, toml: str, error: str) -> None:
    (tmp_path / "t.toml").write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "t.toml", env={})
    assert str(caught.value) == f"{tmp_path / 't.toml'}: {error}"


def test_hub_bounds_have_their_documented_defaults(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text("")
    settings = load_settings(tmp_path / "t.toml", env={})
    hub = settings.hub
    assert (hub.max_defer, hub.request_deadline, hub.poll_deadline, hub.max_api_bytes, hub.max_pages) == (
        86400.0, 60.0, 600.0, 32 * 1024 * 1024, 1000)
    shipped = load_settings(Path(__file__).resolve().parents[2] / "config" / "tracker.toml", env={})
    hub = shipped.hub
    assert (hub.max_defer, hub.request_deadline, hub.poll_deadline, hub.max_api_bytes, hub.max_pages) == (
        86400.0, 60.0, 600.0, 32 * 1024 * 1024, 1000)


def test_intervals_stored_by_an_older_tracker_are_clamped_when_scheduled(hub_standin: HubStandin, tmp_path: Path) -> None:
    from tracker.adapters.settings import Settings
    from tracker.app import make_scheduler, make_tracker
    from tracker.core.intervals import clamp_interval
    from tracker.core.model import RepoId
    from tracker.surfaces.daemon import Daemon

    assert [clamp_interval(s) for s in (0.001, 60.0, 3600.0, 1e20, float("inf"), float("nan"))] == [
        60.0, 60.0, 3600.0, 2678400.0, 2678400.0, 2678400.0]
    tracker = make_tracker(Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                                    hub={"endpoint": hub_standin.url}))
    tracker.store.repos.add(RepoId("acme/fast"), every=0.001, now=tracker.clock())
    tracker.store.repos.add(RepoId("acme/slow"), every=8.64e24, now=tracker.clock())
    daemon = Daemon(tracker, make_scheduler())
    intervals = {r.repo_id: daemon.cycle.interval(r.repo_id, r.every_seconds) for r in tracker.store.repos.all()}
    assert intervals == {"acme/fast": 60.0, "acme/slow": 2678400.0}

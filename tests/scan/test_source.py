"""The scan's advisory source: watched repos from the user's store, others read into scratch stores, bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.scan.conftest import CHAT, ENCODER
from tracker.app import make_tracker
from tracker.core.advisory import advisory_id
from tracker.core.model import RepoId
from tracker.pipeline.scan.model import Found, PinStatus, Reference, SourceKind
from tracker.pipeline.scan.report import ScanReport
from tracker.pipeline.scan.source import AdvisorySource
from tracker.services.scanning import has_store
from tracker.surfaces.cli.scan_command import run_scan

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_pin_older_than_the_history_read_is_said_to_be(histories, scan_settings):
    r = histories.chat
    with AdvisorySource(scan_settings, tracker=None, new_tracker=make_tracker, history=2) as source:
        statuses = source.lookup(RepoId(CHAT), [r[0], r[4]])
    old, recent = statuses[r[0]], statuses[r[4]]
    # r3 .. r5 were read: r0 is placed on the branch (5 behind), and only r5's change is seen to miss.
    assert (old.revision, old.behind, old.head, old.suggested) == (r[0], 5, r[5], r[5])
    assert [a.id for a in old.advisories] == [advisory_id(CHAT, r[5], "update")]
    assert old.notes == ("5 revisions behind: only the newest 2 were read, older changes are not analysed",)
    assert (recent.behind, recent.notes, [a.id for a in recent.advisories]) == (
        1, (), [advisory_id(CHAT, r[5], "update")])


def test_unknown_revisions_and_repos_are_notes_not_errors(histories, scan_settings):
    with AdvisorySource(scan_settings, tracker=None, new_tracker=make_tracker) as source:
        statuses = source.lookup(RepoId(CHAT), ["f" * 40, "no-such-branch"])
        gone = source.lookup(RepoId("acme/missing"), [None])
    assert statuses["f" * 40] == PinStatus(repo=CHAT, ref="f" * 40, notes=(
        f"{CHAT}: no revision {'f' * 40!r} on the Hub",))
    assert statuses["no-such-branch"].notes == (f"{CHAT}: no revision 'no-such-branch' on the Hub",)
    assert gone[None].notes == (
        "not read from the Hub: not found on the Hub (check the id; private and gated repos need HF_TOKEN)",)


def test_a_watched_repo_is_read_from_the_users_store_and_the_watch_list_is_left_alone(
        codebase, histories, scan_settings):
    user = make_tracker(scan_settings)
    user.store.repos.add(RepoId(ENCODER), now=NOW)
    user.poll([ENCODER])  # baseline: e1, the head
    assert has_store(scan_settings)
    output, code = run_scan(codebase / "configs" / "serve.json", settings=scan_settings,
                            user_tracker=lambda: user, output_format="json")
    data = json.loads(output)
    e = histories.encoder
    assert code == 0
    # e0 is older than the user's baseline: placed on the branch through the Hub, one behind.
    assert [(x["repo"], x["revision"], x["behind"], x["suggested_revision"]) for x in data["references"]] == [
        (ENCODER, e[0], 1, e[1]), ("acme/missing", "floating", None, None)]
    assert [w.repo_id for w in user.store.repos.all()] == [ENCODER]


def test_no_store_is_opened_when_the_user_has_none(tmp_path, scan_settings):
    assert not has_store(scan_settings)

    def refuse():
        raise AssertionError("the user's store must not be opened")

    (tmp_path / "app.py").write_text("x = 1\n")
    output, code = run_scan(tmp_path / "app.py", settings=scan_settings, user_tracker=refuse,
                            output_format="text")
    assert (output, code) == ("no Hub model references found (1 files read)\n", 0)


def test_sarif_reports_a_pin_the_tracker_cannot_place():
    ref = Reference(file="src/a b.py", line=3, column=None, repo=RepoId("acme/x"), ref="f" * 40,
                    source=SourceKind.PYTHON, via="AutoModel.from_pretrained")
    status = PinStatus(repo=RepoId("acme/x"), ref="f" * 40, notes=("acme/x: no revision 'fff' on the Hub",))
    report = ScanReport.build("src", Found(references=(ref,), files_read=1), {("acme/x", "f" * 40): status})
    (run,) = report.to_sarif(version="1.2.3")["runs"]
    assert run["tool"]["driver"]["rules"][0]["id"] == "hf-unresolved"
    (result,) = run["results"]
    assert result["locations"] == [{"physicalLocation": {
        "artifactLocation": {"uri": "src/a%20b.py", "uriBaseId": "%SRCROOT%"}, "region": {"startLine": 3}}}]
    assert result["message"]["text"] == "acme/x@ffffffffffff: acme/x: no revision 'fff' on the Hub."
    assert report.to_json()["references"][0]["behind"] is None
    assert report.exit_code == 0 and ScanReport.build(
        "src", report.found, {}, fail_on=["floating"]).exit_code == 0  # pinned, even if unknown


def test_progress_shows_only_on_a_terminal_and_after_a_second(monkeypatch):
    import io
    import os

    from tracker.surfaces.cli.scan_command import PROGRESS_AFTER, progress

    monkeypatch.setattr("sys.stderr", io.StringIO())  # a pipe, a CI log
    with progress(3, "looking up") as bar:
        assert bar.disable is True
    primary, secondary = os.openpty()
    terminal = os.fdopen(secondary, "w")
    try:
        monkeypatch.setattr("sys.stderr", terminal)
        with progress(3, "looking up") as bar:
            assert not bar.disable and (bar.delay, PROGRESS_AFTER) == (1.0, 1.0)
            bar.update()  # within the first second: nothing is drawn
        terminal.flush()
        os.set_blocking(primary, False)
        try:
            drawn = os.read(primary, 4096)
        except BlockingIOError:
            drawn = b""
        assert b"looking up" not in drawn
    finally:
        terminal.close()
        os.close(primary)

"""The log's shape: one line per record, the daemon's poll lines, the heartbeat (tracker/surfaces/logs.py)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from tracker.core.model import PollOutcome, RepoId
from tracker.pipeline.polling import PollResult
from tracker.surfaces.logs import Heartbeat, poll_message, setup_logging


@pytest.fixture
def log_to():
    """setup_logging into a buffer; the test's logger; the levels put back afterwards."""
    names = ["tracker", "alembic", "uvicorn.access"]
    levels = {n: logging.getLogger(n).level for n in names}
    root_level = logging.getLogger().level
    buffer = io.StringIO()
    yield buffer
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_tracker", False):
            root.removeHandler(handler)
    root.setLevel(root_level)
    for n, level in levels.items():
        logging.getLogger(n).setLevel(level)


def fail() -> None:
    raise RuntimeError("boom\nsecond line of the client's text\n  a docs link")


def test_text_records_are_one_line_and_an_exception_is_its_last_line(log_to):
    setup_logging(0, "text", talkative=True, stream=log_to)
    log = logging.getLogger("tracker.test")
    log.info("first\n\n  second  \nthird")
    try:
        fail()
    except RuntimeError:
        log.exception("acme/a: poll failed")
    lines = [line.split(" ", 1)[1] for line in log_to.getvalue().splitlines()]
    assert lines == [
        "INFO tracker.test: first | second | third",
        "ERROR tracker.test: acme/a: poll failed: RuntimeError: boom | second line of the client's text | a docs link",
    ]


def test_at_vv_the_traceback_follows(log_to):
    setup_logging(2, "text", stream=log_to)
    try:
        fail()
    except RuntimeError:
        logging.getLogger("tracker.test").exception("acme/a: poll failed")
    text = log_to.getvalue()
    assert text.splitlines()[0].endswith("ERROR tracker.test: acme/a: poll failed")
    assert "Traceback (most recent call last):" in text and 'in fail\n    raise RuntimeError("boom' in text


def test_json_records(log_to):
    setup_logging(0, "json", talkative=True, stream=log_to)
    try:
        fail()
    except RuntimeError:
        logging.getLogger("tracker.test").warning("two\nlines", extra={"repo": "acme/a", "count": 2},
                                                  exc_info=True)
    record = json.loads(log_to.getvalue())
    record.pop("ts")
    assert record == {"level": "warning", "logger": "tracker.test", "message": "two | lines", "repo": "acme/a",
                      "count": 2, "error": "RuntimeError: boom | second line of the client's text | a docs link"}


@pytest.mark.parametrize(("verbose", "talkative", "tracker_level", "library_level"), [
    (0, False, logging.WARNING, logging.WARNING),
    (0, True, logging.INFO, logging.WARNING),
    (1, False, logging.INFO, logging.WARNING),
    (1, True, logging.DEBUG, logging.WARNING),
    (2, False, logging.DEBUG, logging.INFO),
])
def test_levels(log_to, verbose, talkative, tracker_level, library_level):
    setup_logging(verbose, "text", talkative=talkative, stream=log_to)
    assert logging.getLogger("tracker").level == tracker_level
    assert logging.getLogger("alembic").level == library_level
    assert logging.getLogger("uvicorn.access").level == library_level


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown log format 'xml': use one of text, json"):
        setup_logging(0, "xml")


def result(status, **kw) -> PollResult:
    return PollResult(repo=RepoId("Qwen/Qwen2.5-7B-Instruct"), status=status, **kw)


@pytest.mark.parametrize(("poll", "said"), [
    (result(PollOutcome.NEW, new_revisions=2, processed=2, advisories=1, worst_advisory="high"),
     (logging.INFO, "Qwen/Qwen2.5-7B-Instruct: 2 new revisions, 1 advisory (high)")),
    (result(PollOutcome.NEW, new_revisions=1, processed=1),
     (logging.INFO, "Qwen/Qwen2.5-7B-Instruct: 1 new revision")),
    (result(PollOutcome.NEW, new_revisions=3, processed=3, advisories=2, worst_advisory="critical",
            events=["history_rewritten"]),
     (logging.INFO, "Qwen/Qwen2.5-7B-Instruct: 3 new revisions, history rewritten, 2 advisories (critical)")),
    (result(PollOutcome.BASELINE, new_revisions=1, processed=1),
     (logging.INFO, "Qwen/Qwen2.5-7B-Instruct: first poll, baseline read (1 revision)")),
    (result(PollOutcome.UNCHANGED, processed=2),
     (logging.INFO, "Qwen/Qwen2.5-7B-Instruct: 2 pending revisions read")),
    (result(PollOutcome.UNCHANGED, events=["renamed"], advisories=1, worst_advisory="moderate"),
     (logging.INFO, "Qwen/Qwen2.5-7B-Instruct: renamed, 1 advisory (moderate)")),
    (result(PollOutcome.UNCHANGED), None),
    (result(PollOutcome.BUSY, error="being polled by another process"), None),
    (result(PollOutcome.NOT_FOUND, error="not found on the Hub (check the id; private and gated repos need HF_TOKEN)"),
     (logging.WARNING, "Qwen/Qwen2.5-7B-Instruct: not found on the Hub (check the id; private and gated repos need "
                       "HF_TOKEN)")),
    (result(PollOutcome.GONE, error="repository not found", events=["deleted"], advisories=1, worst_advisory="high"),
     (logging.WARNING, "Qwen/Qwen2.5-7B-Instruct: gone from the Hub (deleted, or made private), 1 advisory (high)")),
    (result(PollOutcome.ERROR, error="GET http://hub/api: HTTP 500 (after 5 retries)"),
     (logging.WARNING, "Qwen/Qwen2.5-7B-Instruct: poll failed: GET http://hub/api: HTTP 500 (after 5 retries)")),
    (result(PollOutcome.DEFERRED, error="rate limited until 2026-01-01T10:00:00+00:00"),
     (logging.INFO, "Qwen/Qwen2.5-7B-Instruct: deferred, rate limited until 2026-01-01T10:00:00+00:00")),
])
def test_poll_lines(poll, said):
    assert poll_message(poll) == said


def test_the_heartbeat_sums_up_a_cycle_then_starts_over():
    beat = Heartbeat()
    assert beat.summary(watched=3, period="1h", pending=2) == (
        "heartbeat: 3 repos watched; last 1h: 0 polls; 2 revisions pending")
    beat.add(result(PollOutcome.NEW, new_revisions=2, advisories=1, worst_advisory="moderate"))
    beat.add(result(PollOutcome.UNCHANGED))
    beat.add(result(PollOutcome.UNCHANGED))
    beat.add(result(PollOutcome.ERROR, error="x"))
    beat.add(result(PollOutcome.NEW, new_revisions=1, advisories=2, worst_advisory="high"))
    assert beat.summary(watched=3, period="1h", pending=0) == (
        "heartbeat: 3 repos watched; last 1h: 5 polls (2 unchanged, 2 new, 1 error), 3 new revisions, "
        "3 advisories (worst high); 0 revisions pending")
    beat.add(result(PollOutcome.UNCHANGED))
    assert beat.summary(watched=1, period="30m") == (
        "heartbeat: 1 repo watched; last 30m: 1 poll (1 unchanged), 0 new revisions, 0 advisories")

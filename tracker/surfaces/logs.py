"""Logging: one setup for every command, and the lines the daemon says about its polls.

Verbosity (``-v`` counts): the tracker's own loggers are at WARNING for one-shot commands and at
INFO for the long-running ones (``tracker run``, ``tracker serve``); ``-v`` lowers them one step,
``-vv`` to DEBUG. Library internals (Alembic, APScheduler, httpx, uvicorn's access log,
SQLAlchemy, huggingface_hub) stay at WARNING until ``-vv``. Every record is one line: a
multi-line message is joined, and a traceback is shown as its last line (its type and message)
unless ``-vv`` asks for the whole of it. ``--log-format json`` writes one JSON object per line
(``ts``, ``level``, ``logger``, ``message``, plus the structured fields a record carries in
``extra``), for log shippers.

The JSON formatter is written here rather than taken from a package: it is twenty lines of the
standard library, and the one-line guarantee for exceptions needs custom code either way.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from tracker.core.escaping import escape_controls
from tracker.core.model import PollOutcome, Severity

if TYPE_CHECKING:
    from tracker.app import Tracker
    from tracker.pipeline.polling import PollResult

LOG_FORMATS = ("text", "json")
_HANDLER_NAME = "tracker"  # marks the root handler setup_logging installed, so a later call replaces it
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Third-party loggers that speak only at -vv ("library internals").
LIBRARY_LOGGERS = (
    "alembic", "apscheduler", "httpx", "httpx2", "httpcore", "uvicorn", "uvicorn.access", "uvicorn.error",
    "sqlalchemy", "huggingface_hub", "urllib3", "asyncio", "filelock", "multipart", "python_multipart",
)

# The attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _one_line(text: str) -> str:
    """Lines of ``text`` joined with " | " (blank lines dropped), control and bidi characters escaped.

    The one escaping of the log sink: messages carry strangers' text (a receiver's error body, a
    branch name), and a log is read on a terminal (``journalctl``, ``kubectl logs``).
    """
    return escape_controls(" | ".join(line.strip() for line in text.splitlines() if line.strip()))


def _exception_line(exc_info: Any) -> str:
    """The last line of a traceback (``Type: message``), on one line."""
    _, exc, _ = exc_info
    if exc is None:
        return ""
    return _one_line("".join(traceback.format_exception_only(type(exc), exc)))


class OneLineFormatter(logging.Formatter):
    """Text records on one line; with ``tracebacks``, an exception's full traceback follows it."""

    def __init__(self, *, tracebacks: bool = False) -> None:
        super().__init__(TEXT_FORMAT)
        self.tracebacks = tracebacks

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # the stdlib name
        return _timestamp(record)

    def format(self, record: logging.LogRecord) -> str:
        record.message = _one_line(record.getMessage())
        record.asctime = self.formatTime(record)
        line = self.formatMessage(record)
        if record.exc_info and record.exc_info[1] is not None:
            if self.tracebacks:
                return line + "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
            return f"{line}: {_exception_line(record.exc_info)}"
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, message, the ``extra`` fields, and ``error``."""

    def __init__(self, *, tracebacks: bool = False) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _one_line(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and not key.startswith("_") and key not in data:
                data[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            data["error"] = _exception_line(record.exc_info)
            if self.tracebacks:
                data["traceback"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(data, ensure_ascii=False, default=str)


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (a test runner may swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def setup_logging(verbose: int = 0, log_format: str = "text", *, talkative: bool = False,
                  stream: TextIO | None = None) -> None:
    """Configure the root logger once per process (replaces handlers set before).

    ``talkative``: the command runs for long (``run``, ``serve``), so the tracker says what it
    does at INFO by default.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}: use one of {', '.join(LOG_FORMATS)}")
    tracebacks = verbose >= 2
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(JsonFormatter(tracebacks=tracebacks) if log_format == "json"
                         else OneLineFormatter(tracebacks=tracebacks))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == _HANDLER_NAME:  # ours from an earlier call; others' handlers stay
            root.removeHandler(old)
    root.addHandler(handler)
    base = logging.INFO if talkative else logging.WARNING
    own = max(logging.DEBUG, base - 10 * verbose)
    root.setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
    logging.getLogger("tracker").setLevel(own)
    library = logging.INFO if verbose >= 2 else logging.WARNING
    for name in LIBRARY_LOGGERS:
        lib = logging.getLogger(name)
        lib.setLevel(library)
        lib.handlers.clear()  # uvicorn and alembic install their own; ours is the one
        lib.propagate = True
    scheduler = logging.getLogger("apscheduler.scheduler")
    for old_filter in [f for f in scheduler.filters if isinstance(f, SkippedTickFilter)]:
        scheduler.removeFilter(old_filter)
    if verbose < 2:
        scheduler.addFilter(SkippedTickFilter())


class SkippedTickFilter(logging.Filter):
    """Drops APScheduler's "skipped: maximum number of running instances reached": the daemon's tick runs
    every couple of seconds and skips while the previous one works, which is by design, not a warning
    (shown again at -vv, with the libraries' internals)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in str(record.msg)


# -- what the daemon says ----------------------------------------------------------------------


def start_line(tracker: Tracker, *, api: tuple[str, int] | None, polling: bool = True,
               watched: int | None = None) -> str:
    """The one line at start: repos watched, database (password hidden), Hub endpoint, API address."""
    from tracker.adapters.settings import format_duration
    from tracker.services import Polling
    from tracker.services.database import describe_database

    reads = Polling(tracker)
    count = reads.watched_count() if watched is None else watched
    where = f"http://{f'[{api[0]}]' if ':' in api[0] else api[0]}:{api[1]}" if api else "off (--no-api)"
    places = (f"database {describe_database(tracker.settings.database.url)}, Hub {reads.hub_endpoint()}, "
              f"API {where}")
    if polling:
        return (f"tracker started: polling {count} repo(s) (every {format_duration(tracker.settings.poll.every)} "
                f"unless set per repo), {places}")
    return f"tracker serving the API (no polling here): {count} repo(s) watched, {places}"



def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


_EVENT_WORDS = {
    "history_rewritten": "history rewritten", "renamed": "renamed", "deleted": "deleted upstream",
    "recreated": "re-created under the same name", "restored": "reachable again", "gated": "gated",
    "disabled": "disabled",
}


def poll_message(result: PollResult) -> tuple[int, str] | None:
    """The level and line the daemon logs for one poll, or None when it found nothing to say.

    "Qwen/Qwen2.5-7B-Instruct: 2 new revisions, 1 advisory (high)".
    """
    status = result.status
    repo = result.repo
    events = [_EVENT_WORDS.get(e, e) for e in result.events]
    if status == PollOutcome.NOT_FOUND:
        return logging.WARNING, f"{repo}: {result.error}"
    if status == PollOutcome.ERROR:
        return logging.WARNING, f"{repo}: poll failed: {result.error}"
    if status in (PollOutcome.GONE, PollOutcome.GATED, PollOutcome.DISABLED):
        what = {PollOutcome.GONE: "gone from the Hub (deleted, or made private)",
                PollOutcome.GATED: "gated on the Hub (set HF_TOKEN with access to read it)",
                PollOutcome.DISABLED: "disabled on the Hub"}[status]
        return logging.WARNING, f"{repo}: {what}" + _advisory_part(result)
    if status == PollOutcome.DEFERRED:
        return logging.INFO, f"{repo}: deferred, {result.error}"
    parts = []
    if status == PollOutcome.BASELINE:
        parts.append(f"first poll, baseline read ({_plural(result.new_revisions, 'revision')})")
    elif result.new_revisions:
        parts.append(_plural(result.new_revisions, "new revision"))
    elif result.processed:
        parts.append(f"{_plural(result.processed, 'pending revision')} read")
    parts += events
    if not parts and not result.advisories:
        return None
    text = f"{repo}: {', '.join(parts)}" if parts else f"{repo}:"
    return logging.INFO, text + _advisory_part(result, first=not parts)


def _advisory_part(result: PollResult, *, first: bool = False) -> str:
    if not result.advisories:
        return ""
    worst = f" ({result.worst_advisory})" if result.worst_advisory else ""
    return ("" if first else ",") + f" {_plural(result.advisories, 'advisory', 'advisories')}{worst}"


def poll_fields(result: PollResult) -> dict[str, Any]:
    """The structured fields of a poll line (the JSON log format carries them)."""
    return {"repo": result.repo, "outcome": result.status.value, "new_revisions": result.new_revisions,
            "processed": result.processed, "advisories": result.advisories,
            "worst_severity": result.worst_advisory, "events": list(result.events), "error": result.error}


def log_poll(logger: logging.Logger, result: PollResult, *, next_try: datetime | None = None) -> None:
    """One line for a poll that found something or failed (with when it is tried again); DEBUG for the rest."""
    said = poll_message(result)
    if said is None:
        logger.debug("%s: %s", result.repo, result.status.value, extra=poll_fields(result))
        return
    level, text = said
    if next_try is not None and result.status in (PollOutcome.ERROR, PollOutcome.NOT_FOUND):
        text += f"; next try {next_try.astimezone(UTC).isoformat(timespec='seconds').replace('+00:00', 'Z')}"
    logger.log(level, "%s", text, extra=poll_fields(result))


@dataclass
class Heartbeat:
    """Poll outcomes since the last summary; the daemon logs one summary per cycle at most."""

    outcomes: Counter[str] = field(default_factory=Counter)
    advisories: int = 0
    worst: list[str] = field(default_factory=list)
    new_revisions: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, result: PollResult) -> None:
        with self._lock:  # polls finish on the scheduler's worker threads
            self.outcomes[result.status.value] += 1
            self.new_revisions += result.new_revisions
            self.advisories += result.advisories
            if result.worst_advisory:
                self.worst.append(result.worst_advisory)

    def summary(self, *, watched: int, period: str, pending: int | None = None) -> str:
        """"heartbeat: 4 repos watched; last 1h: 12 polls (10 unchanged, 1 new, 1 error), 2 new revisions,
        1 advisory; 0 revisions pending" — and the counts start over. A line even when nothing was polled
        ("... last 10m: 0 polls; ..."), so the daemon is never silent for longer than a heartbeat."""
        with self._lock:
            return self._summary(watched=watched, period=period, pending=pending)

    def _summary(self, *, watched: int, period: str, pending: int | None) -> str:
        polls = sum(self.outcomes.values())
        text = f"heartbeat: {_plural(watched, 'repo')} watched; last {period}: {_plural(polls, 'poll')}"
        if polls:
            order = [o.value for o in PollOutcome]
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.outcomes.items(),
                                                            key=lambda kv: order.index(kv[0])))
            text += (f" ({kinds}), {_plural(self.new_revisions, 'new revision')}, "
                     f"{_plural(self.advisories, 'advisory', 'advisories')}")
            worst = worst_of(self.worst)
            if worst:
                text += f" (worst {worst})"
        if pending is not None:
            text += f"; {_plural(pending, 'revision')} pending"
        self.outcomes.clear()
        self.advisories = 0
        self.worst.clear()
        self.new_revisions = 0
        return text


def worst_of(severities: Iterable[str]) -> str | None:
    """The worst of severity names (unknown names ignored)."""
    known = [Severity(s) for s in severities if s in {v.value for v in Severity}]
    worst = Severity.worst(known)
    return worst.value if worst else None

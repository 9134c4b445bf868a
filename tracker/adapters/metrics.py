"""Prometheus metrics, in one place: the counters, and the one-line hooks the edges call.

The edges call these functions (never prometheus_client directly): the Poller for each poll,
the Hub transport for each answer, the Processor for each revision saved, the delivery worker
for each attempt. ``GET /metrics`` (tracker/surfaces/api_ops.py) serves them with the backlog gauges,
read from the database at scrape time.

Counters live in the process (``REGISTRY``), so they start from zero when the daemon starts,
as Prometheus counters do; rates over them are what dashboards use.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tracker.core.model import SEVERITY_NAMES, PollOutcome

# no `_created` series beside each counter: rates are what is read (the function has no annotations)
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)

POLLS = Counter("tracker_polls", "Polls of watched repos, by outcome.", ["outcome"], registry=REGISTRY)
HUB_REQUESTS = Counter("tracker_hub_requests", "Answers from the Hub, by HTTP status ('error': no answer).",
                       ["status"], registry=REGISTRY)
REVISIONS_READ = Counter("tracker_revisions_read", "Revisions read, analysed and stored.", registry=REGISTRY)
FINDINGS = Counter("tracker_findings", "Findings on revisions read, by severity.", ["severity"],
                   registry=REGISTRY)
ADVISORIES = Counter("tracker_advisories", "Advisories raised (revisions and repo events), by severity.",
                     ["severity"], registry=REGISTRY)
DELIVERIES = Counter("tracker_deliveries", "Alert delivery attempts, by outcome (delivered, retry, dead).",
                     ["outcome"], registry=REGISTRY)
POLL_LAG = Histogram(
    "tracker_poll_lag_seconds", "From an upstream commit to the tracker having read it (baselines excluded).",
    buckets=(60, 300, 900, 1800, 3600, 2 * 3600, 6 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400),
    registry=REGISTRY,
)

SEVERITIES = SEVERITY_NAMES
# A per-repo gauge has at most this many series (the stalest repos): a scrape stays small at 10,000 repos,
# and the repos an alert on staleness is about are always in it.
MAX_REPO_SERIES = 1000
for _severity in SEVERITIES:  # every series exists from the start, at zero
    FINDINGS.labels(_severity)
    ADVISORIES.labels(_severity)
for _outcome in ("delivered", "retry", "dead"):
    DELIVERIES.labels(_outcome)
for _poll in PollOutcome:
    POLLS.labels(_poll.value)


# -- hooks the edges call -------------------------------------------------------------------------


def poll_done(outcome: str) -> None:
    POLLS.labels(outcome).inc()


def hub_answer(status: int | None) -> None:
    HUB_REQUESTS.labels(str(status) if status is not None else "error").inc()


def revision_saved(*, finding_severities: Iterable[str], committed_at: datetime | None, read_at: datetime,
                   baseline: bool) -> None:
    REVISIONS_READ.inc()
    for severity in finding_severities:
        FINDINGS.labels(severity).inc()
    if committed_at is not None and not baseline:
        POLL_LAG.observe(max(0.0, (read_at - committed_at).total_seconds()))


def advisories_raised(severities: Iterable[str]) -> None:
    for severity in severities:
        ADVISORIES.labels(severity).inc()


def delivery_attempt(outcome: str) -> None:
    DELIVERIES.labels(outcome).inc()


# -- exposition -----------------------------------------------------------------------------------


class Backlog(Collector):
    """Gauges read at scrape time: name -> (help, value), and name -> (help, label, {label value: value})."""

    def __init__(self, figures: dict[str, tuple[str, float]],
                 labelled: dict[str, tuple[str, str, dict[str, float]]] | None = None) -> None:
        self._figures = figures
        self._labelled = labelled or {}

    def collect(self) -> Iterable[GaugeMetricFamily]:
        for name, (text, value) in self._figures.items():
            yield GaugeMetricFamily(name, text, value=value)
        for name, (text, label, values) in self._labelled.items():
            family = GaugeMetricFamily(name, text, labels=[label])
            for key, number in values.items():
                family.add_metric([key], number)
            yield family


def exposition(gauges: dict[str, tuple[str, float]] | None = None,
               labelled: dict[str, tuple[str, str, dict[str, float]]] | None = None) -> bytes:
    """The text format: the process's counters, then the gauges read from the database at scrape time."""
    body = generate_latest(REGISTRY)
    if gauges or labelled:
        extra = CollectorRegistry(auto_describe=False)
        extra.register(Backlog(gauges or {}, labelled))
        body += generate_latest(extra)
    return body

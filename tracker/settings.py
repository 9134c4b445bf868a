"""Settings: ``config/tracker.toml`` plus environment overrides.

Lookup order for the file: ``--config``/``TRACKER_CONFIG``, then
``./config/tracker.toml`` when it exists, else built-in defaults. Environment
variables win over the file: ``TRACKER_DATABASE_URL`` for the store,
``HF_ENDPOINT`` and ``HF_TOKEN`` for the Hub (read by huggingface_hub itself,
so mirrors and private hubs work as users expect). Secrets never live here.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.errors import ConfigError
from tracker.model import RepoId, Severity, validate_repo_id

DEFAULT_CONFIG_PATH = Path("config/tracker.toml")
DEFAULT_DATABASE_URL = "sqlite:///data/tracker.sqlite3"

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


# Bounds on durations. Any duration: at most ten years (longer is a typo, and overflows date arithmetic).
# A poll interval (`--every`, [poll] every, [[watch]] every): between a minute and 31 days.
MAX_DURATION = 10 * 365 * 86400.0
POLL_EVERY_MIN = 60.0
POLL_EVERY_MAX = 31 * 86400.0


def parse_duration(
    text: str | int | float,
    *,
    allow_zero: bool = False,
    minimum: float | None = None,
    maximum: float = MAX_DURATION,
) -> float:
    """Seconds in ``"90s"``, ``"15m"``, ``"1h30m"``, ``"2d"`` or a bare number of seconds.

    A regex rather than a dependency: the grammar is five units long. Refuses (ConfigError)
    anything non-finite, negative, zero (unless ``allow_zero``), or outside ``minimum..maximum``.
    """
    shown = repr(text) if len(str(text)) <= 40 else f"{str(text)[:40]!r}..."
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ConfigError(f"invalid duration {shown}: use e.g. 90s, 15m, 1h30m, 2d")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        value = text.strip().lower()
        if re.fullmatch(r"\d+(?:\.\d+)?", value):
            seconds = float(value)
        else:
            parts = _DURATION_RE.findall(value)
            if not parts or _DURATION_RE.sub("", value).strip():
                raise ConfigError(f"invalid duration {shown}: use e.g. 90s, 15m, 1h30m, 2d")
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds > maximum:
        raise ConfigError(f"invalid duration {shown}: longer than the maximum of {format_duration(maximum)}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(f"invalid duration {shown}: must be positive")
    if minimum is not None and seconds < minimum:
        raise ConfigError(f"invalid duration {shown}: shorter than the minimum of {format_duration(minimum)}")
    return seconds


def parse_interval(text: str | int | float) -> float:
    """A poll interval: a duration between ``POLL_EVERY_MIN`` (1m) and ``POLL_EVERY_MAX`` (31d)."""
    try:
        return parse_duration(text, minimum=POLL_EVERY_MIN, maximum=POLL_EVERY_MAX)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (a poll interval is between 1m and 31d)") from None


def clamp_interval(seconds: float) -> float:
    """A stored poll interval brought within 1m..31d (a database written by an older tracker may hold 1ms)."""
    if math.isnan(seconds):
        return POLL_EVERY_MAX
    return min(max(seconds, POLL_EVERY_MIN), POLL_EVERY_MAX)


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class WatchSpec:
    repo: RepoId
    branch: str = "main"
    every: float | None = None  # seconds; None = the default interval


@dataclass(frozen=True)
class DeliverySettings:
    """``[delivery]``: how alerts are sent (see docs/delivery.md)."""

    max_attempts: int = 20  # then the delivery is a dead letter (`tracker deliveries retry ID` resends it)
    backoff_base: float = 5.0  # first retry after about this long, doubling each time (with jitter)
    backoff_max: float = 900.0  # never wait longer than this between attempts (a Retry-After may say longer)
    timeout: float = 10.0  # per attempt: connect, send and read the answer
    allow_hosts: tuple[str, ...] = ()  # hosts (or IPs, CIDRs) allowed to be private/loopback targets


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    hub_endpoint: str | None = None  # None: huggingface_hub's own (HF_ENDPOINT or huggingface.co)
    hub_timeout: float = 30.0
    hub_max_retries: int = 5
    hub_max_wait: float = 120.0  # longest Retry-After honoured inline; longer defers the repo
    hub_max_defer: float = 86400.0  # cap on any Retry-After / RateLimit reset a repo is deferred by
    hub_request_deadline: float = 60.0  # wall clock for one request, body included (not per read)
    hub_poll_deadline: float = 600.0  # wall clock for all the Hub requests of one poll of one repo
    hub_max_api_bytes: int = 32 * 1024 * 1024  # cap on one API JSON answer (model info, tree, commits)
    hub_max_pages: int = 1000  # cap on pages per listing (commits, tree)
    # Requests per 5 minutes the daemon may send per Hub rate-limit bucket (tracker/hub/budget.py);
    # the defaults are the Hub's limits for an anonymous IP (shared/hub-protocol.md §10).
    hub_budget_api: int = 500
    hub_budget_resolvers: int = 3000
    hub_webhook_owners: tuple[str, ...] = ()  # owners whose Hub webhooks reach POST /hooks/hub
    hub_webhook_safety_net: float = 86400.0  # their repos are still polled this often
    poll_every: float = 3600.0
    poll_max_attempts: int = 5  # transient failures before a revision is completed with what could be read
    poll_jitter: float = 300.0
    poll_workers: int = 4  # repos polled at the same time by one `tracker run`
    poll_shutdown_grace: float = 30.0  # on SIGTERM: time to finish the revisions in hand, then exit anyway
    max_file_bytes: int = 64 * 1024 * 1024  # cap on any tracked file read from upstream
    max_header_bytes: int = 32 * 1024 * 1024  # cap on a safetensors header
    watch: tuple[WatchSpec, ...] = ()
    severity: dict[str, str] = field(default_factory=dict)
    min_advisory_severity: Severity = Severity.LOW
    tracker_url: str | None = None
    osv_api_url: str | None = None  # None: no dependency lookups (config/tracker.toml turns them on)
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    query_hub_requests: int = 20  # Hub requests one query or querybatch may spend on revisions not seen yet
    api_read_requires_token: bool = False  # [api] read_requires_token: reads need a bearer token too
    config_path: Path | None = None
    delivery: DeliverySettings = field(default_factory=DeliverySettings)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def _get(data: dict[str, Any], section: str, key: str, default: Any) -> Any:
    value = data.get(section, {})
    if not isinstance(value, dict):
        raise ConfigError(f"[{section}] must be a table")
    return value.get(key, default)


def _delivery_settings(data: dict[str, Any], env: dict[str, str]) -> DeliverySettings:
    allow = _get(data, "delivery", "allow_hosts", [])
    if "TRACKER_DELIVERY_ALLOW_HOSTS" in env:
        allow = env["TRACKER_DELIVERY_ALLOW_HOSTS"].split(",")
    if not isinstance(allow, list) or not all(isinstance(h, str) for h in allow):
        raise ConfigError("[delivery] allow_hosts must be a list of host names or addresses")
    attempts = int(_get(data, "delivery", "max_attempts", 20))
    if attempts < 1:
        raise ConfigError("[delivery] max_attempts must be at least 1")
    return DeliverySettings(
        max_attempts=attempts,
        backoff_base=parse_duration(_get(data, "delivery", "backoff_base", "5s")),
        backoff_max=parse_duration(_get(data, "delivery", "backoff_max", "15m")),
        timeout=parse_duration(_get(data, "delivery", "timeout", "10s")),
        allow_hosts=tuple(h.strip().lower() for h in allow if h.strip()),
    )


def _flag(data: dict[str, Any], section: str, key: str, default: bool) -> bool:
    value = _get(data, section, key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"[{section}] {key} must be true or false, not {value!r:.40}")
    return value


def _positive_int(data: dict[str, Any], section: str, key: str, default: int) -> int:
    value = _get(data, section, key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"[{section}] {key} must be a positive whole number, not {value!r:.40}")
    return value


def _owners(value: Any) -> tuple[str, ...]:
    """``[hub] webhook_owners``: Hub user or organisation names."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError("[hub] webhook_owners must be a list of Hub user or organisation names")
    for owner in value:
        try:
            validate_repo_id(f"{owner}/x")
        except ValueError:
            raise ConfigError(f"[hub] webhook_owners: invalid owner name {owner!r:.60}") from None
    return tuple(value)


def load_settings(path: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None) -> Settings:
    """Read the config file (if any) and apply environment overrides."""
    env = dict(os.environ if env is None else env)
    explicit = path or env.get("TRACKER_CONFIG")
    config_path = Path(explicit) if explicit else (DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None)
    data: dict[str, Any] = {}
    if config_path is not None:
        try:
            data = tomllib.loads(config_path.read_text("utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {config_path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{config_path}: invalid TOML: {exc}") from exc

    try:
        default_every = parse_interval(_get(data, "poll", "every", "1h"))
        watch = []
        for item in data.get("watch", []):
            if isinstance(item, str):
                item = {"repo": item}
            repo = validate_repo_id(item["repo"])
            every = parse_interval(item["every"]) if "every" in item else None
            watch.append(WatchSpec(repo=repo, branch=item.get("branch", "main"), every=every))
        severity = {str(k): str(v) for k, v in data.get("severity", {}).items()}
        for value in severity.values():
            Severity(value)  # an unknown severity name is a config error, said now
        settings = Settings(
            database_url=env.get("TRACKER_DATABASE_URL") or _get(data, "database", "url", DEFAULT_DATABASE_URL),
            hub_endpoint=env.get("HF_ENDPOINT") or _get(data, "hub", "endpoint", None),
            hub_timeout=parse_duration(_get(data, "hub", "timeout", "30s")),
            hub_max_retries=int(_get(data, "hub", "max_retries", 5)),
            hub_max_wait=parse_duration(_get(data, "hub", "max_wait", "2m")),
            hub_max_defer=parse_duration(_get(data, "hub", "max_defer", "1d"), maximum=POLL_EVERY_MAX),
            hub_request_deadline=parse_duration(_get(data, "hub", "request_deadline", "60s")),
            hub_poll_deadline=parse_duration(_get(data, "hub", "poll_deadline", "10m")),
            hub_max_api_bytes=_positive_int(data, "hub", "max_api_bytes", 32 * 1024 * 1024),
            hub_max_pages=_positive_int(data, "hub", "max_pages", 1000),
            hub_budget_api=_positive_int(data, "hub", "budget_api_per_5min", 500),
            hub_budget_resolvers=_positive_int(data, "hub", "budget_resolvers_per_5min", 3000),
            hub_webhook_owners=_owners(_get(data, "hub", "webhook_owners", [])),
            hub_webhook_safety_net=parse_interval(_get(data, "hub", "webhook_safety_net", "1d")),
            poll_every=default_every,
            poll_max_attempts=_positive_int(data, "poll", "max_attempts", 5),
            poll_jitter=parse_duration(_get(data, "poll", "jitter", "5m"), allow_zero=True),
            poll_workers=_positive_int(data, "poll", "workers", 4),
            poll_shutdown_grace=parse_duration(_get(data, "poll", "shutdown_grace", "30s"), allow_zero=True),
            max_file_bytes=int(_get(data, "limits", "max_file_bytes", 64 * 1024 * 1024)),
            max_header_bytes=int(_get(data, "limits", "max_header_bytes", 32 * 1024 * 1024)),
            watch=tuple(watch),
            severity=severity,
            min_advisory_severity=Severity(_get(data, "advisories", "min_severity", "low")),
            tracker_url=_get(data, "advisories", "tracker_url", None),
            osv_api_url=env.get("TRACKER_OSV_API_URL") or _get(data, "osv", "api_url", None) or None,
            api_host=_get(data, "api", "host", "127.0.0.1"),
            api_port=int(_get(data, "api", "port", 8080)),
            query_hub_requests=_positive_int(data, "api", "max_hub_requests", 20),
            api_read_requires_token=_flag(data, "api", "read_requires_token", False),
            config_path=config_path,
            delivery=_delivery_settings(data, env),
        )
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        where = config_path or "settings"
        raise ConfigError(f"{where}: {exc}") from exc
    return settings

"""Settings: ``config/tracker.toml`` plus environment overrides, validated.

Lookup order for the file: ``--config``/``TRACKER_CONFIG``, then
``./config/tracker.toml`` when it exists, else built-in defaults. Every key
``[section] key`` can be overridden by the environment variable
``TRACKER_<SECTION>_<KEY>`` (``TRACKER_HUB_TIMEOUT=10s``; a list is
comma-separated); ``HF_ENDPOINT`` also sets ``[hub] endpoint`` and ``HF_TOKEN``
is read by huggingface_hub itself, so mirrors and private hubs work as users
expect. Secrets never live in the file.

The defaults live here and nowhere else: each key is one line of :class:`Settings`
(or of :class:`DeliverySettings` for ``[delivery]``), ``key("section.name", default)``
with its type. The types below check values and say what is allowed. pydantic does the
validation (``extra="forbid"``: an unknown field is an error), and this module reads
the file first so that an unknown section or key is named with a "did you mean".
Loading does not go through pydantic-settings' sources: a ``Settings(...)`` built
in code must never pick up the process's environment, and the layering (defaults,
file, environment) is the short loop in :func:`load_with_sources`.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import field, fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from tracker.core.errors import ConfigError, SettingsError
from tracker.core.intervals import POLL_EVERY_MAX, POLL_EVERY_MIN
from tracker.core.model import RepoId, Severity, validate_repo_id

DEFAULT_CONFIG_PATH = Path("config/tracker.toml")
DEFAULT_DATABASE_URL = "sqlite:///data/tracker.sqlite3"

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


# Bounds on durations. Any duration: at most ten years (longer is a typo, and overflows date arithmetic).
# A poll interval (`--every`, [poll] every, [[watch]] every): POLL_EVERY_MIN..POLL_EVERY_MAX (tracker/core/intervals.py).
MAX_DURATION = 10 * 365 * 86400.0


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


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# -- value types: each checks its value and, when it refuses, says what is allowed -------------


def _duration(**bounds: Any) -> Callable[[Any], float]:
    return lambda value: parse_duration(value, **bounds)


def _whole(minimum: int, maximum: int | None = None) -> Callable[[Any], int]:
    allowed = f"a whole number from {minimum} to {maximum}" if maximum else f"a whole number, at least {minimum}"

    def check(value: Any) -> int:
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):  # from the environment
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be {allowed}, not {value!r:.40}")
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError(f"must be {allowed}, not {value}")
        return value

    return check


def _flag(value: Any) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):  # from the environment
        return value.strip().lower() in ("true", "1")
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, not {value!r:.40}")
    return value


def _severity(value: Any) -> Severity:
    if isinstance(value, Severity):
        return value
    try:
        return Severity(value)
    except ValueError:
        allowed = ", ".join(s.value for s in Severity)
        raise ValueError(f"must be one of {allowed}, not {value!r:.40}") from None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {value!r:.40}")
    return value


def _device(value: Any) -> str:
    if value not in ("cpu", "cuda"):
        raise ValueError(f"must be cpu or cuda, not {value!r:.40}")
    return str(value)


def _optional_text(value: Any) -> str | None:
    return None if value is None or value == "" else _text(value)


def _strings(what: str) -> Callable[[Any], tuple[str, ...]]:
    def check(value: Any) -> tuple[str, ...]:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"must be a list of {what}, not {value!r:.60}")
        return tuple(value)

    return check


def _owners(value: tuple[str, ...]) -> tuple[str, ...]:
    for owner in value:
        try:
            validate_repo_id(f"{owner}/x")
        except ValueError:
            raise ValueError(f"invalid owner name {owner!r:.60}: use Hub user or organisation names") from None
    return value


def _public_url(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", value):
        raise ValueError(f"must be an http(s) URL such as https://tracker.example.org, not {value!r:.60}")
    return value.rstrip("/") if value else value


def _hosts(value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(h.strip().lower() for h in value if h.strip())


def check_database_url(value: Any) -> str:
    """A database URL the tracker can open, or one ConfigError line that says how to fix it."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    url = _text(value)
    usage = "use sqlite:///path/tracker.sqlite3 or postgresql+psycopg://user@host/db"
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ValueError(f"{url!r:.80} is not a database URL: {usage}") from None
    backend, driver = parsed.get_backend_name(), parsed.get_driver_name()
    if backend == "sqlite" and driver == "pysqlite":
        return url
    if backend == "postgresql" and driver == "psycopg":
        if importlib.util.find_spec("psycopg") is None:
            raise ValueError(
                "PostgreSQL needs its driver: install upstream-tracker[postgres] (pip install 'upstream-tracker[postgres]')"
            )
        return url
    if backend == "postgresql":
        raise ValueError(f"the PostgreSQL driver {driver!r} is not supported: use postgresql+psycopg://user@host/db")
    raise ValueError(f"the {backend} database is not supported: {usage}")


def _finding_codes(value: dict[str, Severity]) -> dict[str, Severity]:
    from tracker.core.findings.rules import SeverityRules

    known = SeverityRules.default().table
    for code in value:
        if code not in known:
            raise ValueError(f"unknown finding code {code!r:.80}{_did_you_mean(code, known)}")
    return value


Duration = Annotated[float, BeforeValidator(_duration())]
DurationOrZero = Annotated[float, BeforeValidator(_duration(allow_zero=True))]
DeferDuration = Annotated[float, BeforeValidator(_duration(maximum=POLL_EVERY_MAX))]
Interval = Annotated[float, BeforeValidator(parse_interval)]
Count = Annotated[int, BeforeValidator(_whole(1))]
Port = Annotated[int, BeforeValidator(_whole(1, 65535))]
Flag = Annotated[bool, BeforeValidator(_flag)]
Text = Annotated[str, BeforeValidator(_text)]
OptionalText = Annotated[str | None, BeforeValidator(_optional_text)]
SeverityName = Annotated[Severity, BeforeValidator(_severity)]
DatabaseURL = Annotated[str, BeforeValidator(check_database_url)]
Owners = Annotated[tuple[str, ...], BeforeValidator(_strings("Hub user or organisation names")), AfterValidator(_owners)]
Hosts = Annotated[tuple[str, ...], BeforeValidator(_strings("host names or addresses")), AfterValidator(_hosts)]
PublicURL = Annotated[str | None, BeforeValidator(_optional_text), AfterValidator(_public_url)]
SeverityOverrides = Annotated[dict[str, SeverityName], AfterValidator(_finding_codes)]


def key(name: str, default: Any, *, secret: bool = False) -> Any:
    """A setting read from ``[section] key`` of the file (``name`` is ``"section.key"``).

    ``secret``: ``tracker config check`` prints it masked, and the settings' repr leaves it out.
    """
    return Field(default=default, repr=not secret, json_schema_extra={"key": name, "secret": secret})


_STRICT = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def _repo(value: Any) -> RepoId:
    return validate_repo_id(_text(value))


@dataclass(frozen=True, config=_STRICT)
class WatchSpec:
    """One ``[[watch]]`` entry (a bare string is the repo)."""

    repo: Annotated[RepoId, BeforeValidator(_repo)]
    branch: Text = "main"
    every: Annotated[float | None, BeforeValidator(lambda v: None if v is None else parse_interval(v))] = None


@dataclass(frozen=True, config=_STRICT)
class DeliverySettings:
    """``[delivery]``: how alerts are sent (see docs/delivery.md). Each field is a key of the section."""

    max_attempts: Count = 20  # then the delivery is a dead letter (`tracker deliveries retry ID` resends it)
    backoff_base: Duration = 5.0  # first retry after about this long, doubling each time (with jitter)
    backoff_max: Duration = 900.0  # never wait longer than this between attempts (a Retry-After may say longer)
    timeout: Duration = 10.0  # the deadline of one attempt: connect, send and the whole answer
    allow_hosts: Hosts = ()  # hosts (or IPs, CIDRs) allowed to be private/loopback targets
    workers: Count = 8  # attempts in flight at once, over all receivers
    per_target: Count = 2  # attempts in flight to one receiver (scheme, host, port)
    max_response_bytes: Count = 16 * 1024  # of an error answer's body, raw and decoded; the rest is not read


@dataclass(frozen=True, config=_STRICT)
class Settings:
    """Every setting, with its default. Fields made with ``key()`` are read from the file and the environment.

    To add a setting: one line here, ``name: Type = key("section.key", default)  # why``, then
    document it in config/tracker.toml (tests/test_docs.py checks both agree).
    """

    database_url: DatabaseURL = key("database.url", DEFAULT_DATABASE_URL)
    hub_endpoint: OptionalText = key("hub.endpoint", None)  # None: huggingface_hub's own (HF_ENDPOINT or huggingface.co)
    hub_timeout: Duration = key("hub.timeout", 30.0)
    hub_max_retries: Annotated[int, BeforeValidator(_whole(0))] = key("hub.max_retries", 5)
    hub_max_wait: Duration = key("hub.max_wait", 120.0)  # longest Retry-After honoured inline; longer defers the repo
    hub_max_defer: DeferDuration = key("hub.max_defer", 86400.0)  # cap on any Retry-After / RateLimit reset
    hub_request_deadline: Duration = key("hub.request_deadline", 60.0)  # wall clock for one request, body included
    hub_poll_deadline: Duration = key("hub.poll_deadline", 600.0)  # wall clock for all the requests of one poll
    hub_max_api_bytes: Count = key("hub.max_api_bytes", 32 * 1024 * 1024)  # cap on one API JSON answer
    hub_max_pages: Count = key("hub.max_pages", 1000)  # cap on pages per listing (commits, tree)
    # Requests per 5 minutes the daemon may send per Hub rate-limit bucket (tracker/adapters/hub/budget.py);
    # the defaults are the Hub's limits for an anonymous IP (shared/hub-protocol.md §10).
    hub_budget_api: Count = key("hub.budget_api_per_5min", 500)
    hub_budget_resolvers: Count = key("hub.budget_resolvers_per_5min", 3000)
    hub_webhook_owners: Owners = key("hub.webhook_owners", ())  # owners whose Hub webhooks reach POST /hooks/hub
    hub_webhook_safety_net: Interval = key("hub.webhook_safety_net", 86400.0)  # their repos are still polled this often
    # The secret the Hub's webhooks send (X-Webhook-Secret); set, it turns on POST /hooks/hub.
    hub_webhook_secret: OptionalText = key("hub.webhook_secret", None, secret=True)
    poll_every: Interval = key("poll.every", 3600.0)
    poll_max_attempts: Count = key("poll.max_attempts", 5)  # transient failures before a revision is completed
    # More new commits than this in one poll is a flood: the head is read now, the rest in the background.
    poll_max_new_commits: Count = key("poll.max_new_commits", 1000)
    poll_backlog_per_poll: Count = key("poll.backlog_per_poll", 100)  # a flood's revisions read per poll, last
    poll_jitter: DurationOrZero = key("poll.jitter", 300.0)
    # How often the daemon walks the Hub-wide change listing for pushes to any watched repo ("0s": never,
    # only when that is cheaper than checking the due repos one by one).
    poll_listen_every: DurationOrZero = key("poll.listen_every", 60.0)
    poll_workers: Count = key("poll.workers", 4)  # repos polled at the same time by one `tracker run`
    poll_shutdown_grace: DurationOrZero = key("poll.shutdown_grace", 30.0)  # on SIGTERM: finish, then exit anyway
    max_file_bytes: Count = key("limits.max_file_bytes", 64 * 1024 * 1024)  # cap on any tracked file read
    max_header_bytes: Count = key("limits.max_header_bytes", 32 * 1024 * 1024)  # cap on a safetensors header
    # One revision's analysis: range requests (all range reads together), memory of the parsed headers it
    # keeps (evicted by size), and CPU time; what does not fit is skipped and reported (analysis.budget_exceeded).
    revision_requests: Count = key("limits.revision_requests", 200)
    revision_header_bytes: Count = key("limits.revision_header_bytes", 256 * 1024 * 1024)
    revision_cpu: Duration = key("limits.revision_cpu", 60.0)
    # The file versions kept in the database (the blob cache); past it the least recently read go first,
    # except those the latest revision of a watched repo reads. Entries older than blob_cache_age go too.
    blob_cache_bytes: Count = key("limits.blob_cache_bytes", 1024 * 1024 * 1024)
    blob_cache_age: Duration = key("limits.blob_cache_age", 90 * 86400.0)
    # Range requests and bytes each side of a revision may spend comparing changed weights' tensors (0: off).
    weight_compare_requests: Annotated[int, BeforeValidator(_whole(0))] = key("limits.weight_compare_requests", 64)
    weight_compare_bytes: Annotated[int, BeforeValidator(_whole(0))] = key("limits.weight_compare_bytes", 16 * 1024 * 1024)
    min_advisory_severity: SeverityName = key("advisories.min_severity", Severity.LOW)
    max_versions: Count = key("advisories.max_versions", 1000)  # the newest affected commits a record lists
    tracker_url: PublicURL = key("advisories.tracker_url", None)  # the older name of [api] public_url
    osv_api_url: OptionalText = key("osv.api_url", None)  # None: no dependency lookups (config/tracker.toml sets OSV.dev)
    api_host: Text = key("api.host", "127.0.0.1")
    api_port: Port = key("api.port", 8080)
    query_hub_requests: Count = key("api.max_hub_requests", 20)  # Hub requests one query or querybatch may spend
    api_read_requires_token: Flag = key("api.read_requires_token", False)  # reads need a bearer token too
    api_public_url: PublicURL = key("api.public_url", None)  # this server's address, for links (else the Host's)
    # Host headers answered when no public_url is set; empty: the address served on, and localhost.
    api_allowed_hosts: Hosts = key("api.allowed_hosts", ())
    api_on_demand_reads: Count = key("api.on_demand_reads", 2)  # Hub reads (diffs, estimates) run at once for callers
    api_on_demand_per_client: Count = key("api.on_demand_per_client", 1)  # of those, for one client address
    # `tracker verify` and the daemon's opt-in verification (docs/verify.md):
    verify_enabled: Flag = key("verify.enabled", False)  # the daemon verifies revisions whose findings reach min_severity
    verify_min_severity: SeverityName = key("verify.min_severity", Severity.HIGH)
    verify_max_bytes: Count = key("verify.max_bytes", 2 * 1024**3)  # downloaded per revision; a larger file is refused first
    verify_max_params: Count = key("verify.max_params", 1_000_000_000)  # larger models are not run (tokenizers always are)
    verify_max_memory: Count = key("verify.max_memory", 16 * 1024**3)  # address space of the verification process
    verify_max_cpu: Duration = key("verify.max_cpu", 1200.0)  # CPU seconds of the verification process
    verify_timeout: Duration = key("verify.timeout", 900.0)  # wall clock of the verification process
    verify_samples: Count = key("verify.samples", 32)  # sample texts or prompts run through both revisions
    verify_cache_dir: OptionalText = key("verify.cache_dir", None)  # None: verify-cache/ beside the SQLite database, else data/
    verify_device: Annotated[str, BeforeValidator(_device)] = key("verify.device", "cpu")  # cpu or cuda
    # Whole sections, each validated by its own type:
    delivery: DeliverySettings = field(default_factory=DeliverySettings)  # [delivery]
    watch: tuple[WatchSpec, ...] = ()  # [[watch]]
    severity: SeverityOverrides = field(default_factory=dict)  # [severity]: finding code = severity
    config_path: Path | None = None  # the file these came from (None: defaults and environment only)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def public_url(self) -> str | None:
        """Where links point: ``[api] public_url``, else ``[advisories] tracker_url`` (its older name)."""
        return self.api_public_url or self.tracker_url


# -- the keys, derived from the classes above ---------------------------------------------------


def _fields_of(cls: type) -> dict[str, FieldInfo]:
    fields: dict[str, FieldInfo] = cls.__pydantic_fields__  # type: ignore[attr-defined]  # set by pydantic's dataclass
    return fields

SECTIONS_WHOLE = {"delivery": "delivery", "watch": "watch", "severity": "severity"}  # section -> field


def _keys() -> dict[tuple[str, str], str]:
    """(section, key) -> field of Settings, for every field made with ``key()``."""
    found: dict[tuple[str, str], str] = {}
    for name, info in _fields_of(Settings).items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get("key"), str):
            section, _, key_name = str(extra["key"]).partition(".")
            found[(section, key_name)] = name
    for f in fields(DeliverySettings):
        found[("delivery", f.name)] = f"delivery.{f.name}"
    return found


KEYS = _keys()


def default(name: str) -> Any:
    """The default of a field of :class:`Settings`, or ``"delivery.x"`` (for signatures that take one setting)."""
    if name.startswith("delivery."):
        return _fields_of(DeliverySettings)[name.removeprefix("delivery.")].default
    return _fields_of(Settings)[name].default


SECTIONS = sorted({section for section, _ in KEYS} | set(SECTIONS_WHOLE))
# Other names that set a key, besides TRACKER_<SECTION>_<KEY> (read by huggingface_hub too).
ENV_ALIASES = {("hub", "endpoint"): "HF_ENDPOINT", ("hub", "webhook_secret"): "TRACKER_WEBHOOK_SECRET"}


def env_name(section: str, key_name: str) -> str:
    return f"TRACKER_{section}_{key_name}".upper()


def _did_you_mean(word: str, candidates: Any) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _label(section: str, key_name: str | None = None) -> str:
    if section == "watch":
        return "[[watch]]" + (f" {key_name}" if key_name else "")
    return f"[{section}]" + (f" {key_name}" if key_name else "")


def _check_names(data: dict[str, Any]) -> None:
    """Every section and key of the file is known: the first that is not is named, with the closest known."""
    for section, body in data.items():
        if section not in SECTIONS:
            close = difflib.get_close_matches(section, SECTIONS, n=1, cutoff=0.6)
            hint = f" (did you mean [{close[0]}]?)" if close else f" (the sections are {', '.join(SECTIONS)})"
            raise ConfigError(f"unknown section [{section}]{hint}")
        if section == "watch":
            if not isinstance(body, list):
                raise ConfigError("[[watch]] must be a list of tables ([[watch]] repo = \"owner/name\")")
            known = [f.name for f in fields(WatchSpec)]
            for number, item in enumerate(body, 1):
                for key_name in item if isinstance(item, dict) else ():
                    if key_name not in known:
                        raise ConfigError(
                            f"[[watch]] #{number} {key_name}: unknown key{_did_you_mean(key_name, known)}"
                        )
            continue
        if not isinstance(body, dict):
            raise ConfigError(f"[{section}] must be a table")
        if section == "severity":
            continue  # keys are finding codes, checked with the values
        known = [k for s, k in KEYS if s == section]
        for key_name in body:
            if key_name not in known:
                raise ConfigError(f"[{section}] {key_name}: unknown key{_did_you_mean(key_name, known)}")


def _explain(exc: ValidationError, sources: Mapping[str, str]) -> str:
    """The first error of a validation as one line that names its key (and where the value came from)."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    by_field = {name: (section, key_name) for (section, key_name), name in KEYS.items()}
    name = ".".join(loc[:2]) if loc and loc[0] == "delivery" else (loc[0] if loc else "")
    if name in by_field:
        section, key_name = by_field[name]
        where = _label(section, key_name)
    elif loc and loc[0] == "watch":
        where = f"[[watch]] #{int(loc[1]) + 1}" + (f" {loc[2]}" if len(loc) > 2 else "") if len(loc) > 1 else "[[watch]]"
    elif loc and loc[0] == "severity":
        where = "[severity]" + (f" {loc[1]}" if len(loc) > 1 else "")
    else:
        where = ".".join(loc) or "settings"
    origin = sources.get(name)
    if origin and origin.startswith("env "):
        where = f"{origin.removeprefix('env ')} ({where})"
    ctx = error.get("ctx") or {}
    message = str(ctx["error"]) if "error" in ctx else error["msg"]
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{where}: {message}"


# TRACKER_* names that are not keys of the file: read where they are used, never a typo.
OTHER_VARIABLES = frozenset({
    "TRACKER_CONFIG",  # the config file (above)
    "TRACKER_LOG_FORMAT",  # text or json (tracker/surfaces/logs.py)
    "TRACKER_WEBHOOK_SECRET",  # the older name of [hub] webhook_secret (ENV_ALIASES)
    "TRACKER_DB_PASSWORD",  # deploy/compose.yaml builds the database URL from it
    "TRACKER_OSV_RECORDS",  # the OSV stand-in's records (standin/)
})
TEST_PREFIX = "TRACKER_TEST_"  # the test suite's own switches (tests/, .ci/run)


def _check_environment(env: Mapping[str, str]) -> None:
    """A ``TRACKER_...`` variable that names no key is a typo: said, like one in the file.

    Every ``TRACKER_`` name counts, not only those of a known section: ``TRACKER_DATABSE_URL``
    (a misspelt section) would otherwise be ignored while ``TRACKER_DATABASE_ULR`` is caught.
    """
    known = {env_name(section, key_name) for section, key_name in KEYS} | set(ENV_ALIASES.values())
    for variable in sorted(env):
        if (variable.startswith("TRACKER_") and variable not in known and variable not in OTHER_VARIABLES
                and not variable.startswith(TEST_PREFIX)):
            raise SettingsError(f"{variable}: not a setting{_did_you_mean(variable, known | OTHER_VARIABLES)}")


def load_with_sources(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> tuple[Settings, dict[str, str]]:
    """The settings, and where each key not at its default came from (``"file"`` or ``"env NAME"``)."""
    env = dict(os.environ if env is None else env)
    explicit = path or env.get("TRACKER_CONFIG")
    config_path = Path(explicit) if explicit else (DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None)
    data: dict[str, Any] = {}
    if config_path is not None:
        if config_path.exists() and not config_path.is_file():  # a FIFO or a device would block or never end
            raise SettingsError(f"the config file {config_path} is not a regular file: give a TOML file")
        try:
            data = tomllib.loads(config_path.read_text("utf-8"))
        except FileNotFoundError as exc:
            raise SettingsError(f"config file not found: {config_path}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"cannot read the config file {config_path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{config_path}: invalid TOML: {exc}") from exc
    where = str(config_path) if config_path else "settings"
    try:
        _check_names(data)
    except ConfigError as exc:
        raise SettingsError(f"{where}: {exc}") from None

    _check_environment(env)
    values: dict[str, Any] = {}
    delivery: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for (section, key_name), name in KEYS.items():
        value, origin = data.get(section, {}).get(key_name), "file"
        for variable in (env_name(section, key_name), ENV_ALIASES.get((section, key_name))):
            if variable and env.get(variable):
                value, origin = env[variable], f"env {variable}"
                break
        if value is None and key_name not in data.get(section, {}):
            continue
        if origin != "file" and isinstance(default(name), tuple):
            value = [part.strip() for part in value.split(",")]  # a list, from the environment
        sources[name] = origin
        if name.startswith("delivery."):
            delivery[name.removeprefix("delivery.")] = value
        else:
            values[name] = value
    watch = [{"repo": item} if isinstance(item, str) else item for item in data.get("watch", [])]
    try:
        # pydantic validates the plain dicts and lists into their dataclasses
        raw = {**values, "delivery": delivery, "watch": watch, "severity": data.get("severity", {})}
        settings = Settings(**raw, config_path=config_path)
    except ValidationError as exc:
        problem = _explain(exc, sources)
        raise SettingsError(problem if problem.startswith("TRACKER_") else f"{where}: {problem}") from None
    return settings, sources


def load_settings(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read the config file (if any) and apply environment overrides; ConfigError names the first bad key."""
    return load_with_sources(path, env)[0]


def describe(settings: Settings, sources: Mapping[str, str]) -> list[str]:
    """The effective configuration as TOML lines, secrets masked, each marked with where it came from."""
    from sqlalchemy.engine import make_url

    lines: list[str] = []
    by_section: dict[str, list[tuple[str, str]]] = {}
    for (section, key_name), name in KEYS.items():
        by_section.setdefault(section, []).append((key_name, name))
    secret = {
        name
        for name, info in _fields_of(Settings).items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("secret")
    }
    for section, entries in by_section.items():
        lines.append(f"[{section}]")
        for key_name, name in entries:
            owner: Any = settings
            for part in name.split("."):
                owner = getattr(owner, part)
            value = owner
            if name == "database_url":
                value = make_url(value).render_as_string(hide_password=True)
            shown = '"********"' if name in secret and value else _toml(value)
            origin = sources.get(name, "default")
            lines.append(f"{key_name} = {shown}" + ("" if origin == "default" else f"  # {origin}"))
        lines.append("")
    for code, severity in sorted(settings.severity.items()):
        if code == next(iter(sorted(settings.severity))):
            lines.append("[severity]")
        lines.append(f'"{code}" = "{severity.value}"')
    if settings.severity:
        lines.append("")
    for spec in settings.watch:
        lines.append("[[watch]]")
        lines.append(f"repo = {_toml(spec.repo)}")
        if spec.branch != "main":
            lines.append(f"branch = {_toml(spec.branch)}")
        if spec.every is not None:
            lines.append(f"every = {_toml(format_duration(spec.every))}")
    return lines


def _toml(value: Any) -> str:
    import json

    if isinstance(value, Severity):
        return f'"{value.value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if value is None:
        return '""  # unset'
    if isinstance(value, float):  # every float setting is a duration
        return f'"{format_duration(value)}"' if value.is_integer() else repr(value)
    return json.dumps(value) if isinstance(value, str) else str(value)

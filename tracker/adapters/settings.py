"""Settings: ``config/tracker.toml`` plus environment overrides, validated.

Lookup order for the file: ``--config``/``TRACKER_CONFIG``, then
``./config/tracker.toml`` when it exists, else built-in defaults. Every key
``[section] key`` can be overridden by the environment variable
``TRACKER_<SECTION>_<KEY>`` (``TRACKER_HUB_TIMEOUT=10s``; a list is
comma-separated); ``HF_ENDPOINT`` also sets ``[hub] endpoint`` and ``HF_TOKEN``
is read by huggingface_hub itself, so mirrors and private hubs work as users
expect. Secrets never live in the file.

The defaults live here and nowhere else: each section is one class (``[hub]`` is
:class:`HubSettings`, ``settings.hub``) and each key one line of it, ``name: Type = default``
with the key's own name. The types below check values and say what is allowed. pydantic does the
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
from dataclasses import field, fields, replace
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


def secret(default: Any) -> Any:
    """A key that holds a secret: ``tracker config check`` prints it masked, and the settings' repr leaves it out."""
    return Field(default=default, repr=False, json_schema_extra={"secret": True})


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
class DatabaseSettings:
    """``[database]``: where the tracker keeps its state (docs/operations.md)."""

    url: DatabaseURL = DEFAULT_DATABASE_URL


@dataclass(frozen=True, config=_STRICT)
class HubSettings:
    """``[hub]``: how the Hub is reached, within which bounds, and its webhooks."""

    endpoint: OptionalText = None  # None: huggingface_hub's own (HF_ENDPOINT or huggingface.co)
    timeout: Duration = 30.0
    max_retries: Annotated[int, BeforeValidator(_whole(0))] = 5
    max_wait: Duration = 120.0  # longest Retry-After honoured inline; longer defers the repo
    max_defer: DeferDuration = 86400.0  # cap on any Retry-After / RateLimit reset
    request_deadline: Duration = 60.0  # wall clock for one request, body included
    poll_deadline: Duration = 600.0  # wall clock for all the requests of one poll
    max_api_bytes: Count = 32 * 1024 * 1024  # cap on one API JSON answer
    max_pages: Count = 1000  # cap on pages per listing (commits, tree)
    # Requests per 5 minutes the daemon may send per Hub rate-limit bucket (tracker/adapters/hub/budget.py);
    # the defaults are the Hub's limits for an anonymous IP (shared/hub-protocol.md §10).
    budget_api_per_5min: Count = 500
    budget_resolvers_per_5min: Count = 3000
    webhook_owners: Owners = ()  # owners whose Hub webhooks reach POST /hooks/hub
    webhook_safety_net: Interval = 86400.0  # their repos are still polled this often
    # The secret the Hub's webhooks send (X-Webhook-Secret); set, it turns on POST /hooks/hub.
    webhook_secret: OptionalText = secret(None)


@dataclass(frozen=True, config=_STRICT)
class PollSettings:
    """``[poll]``: how often watched repos are polled, and how much one poll may read."""

    every: Interval = 3600.0
    max_attempts: Count = 5  # transient failures before a revision is completed
    # More new commits than this in one poll is a flood: the head is read now, the rest in the background.
    max_new_commits: Count = 1000
    backlog_per_poll: Count = 100  # a flood's revisions read per poll, last
    jitter: DurationOrZero = 300.0
    # How often the daemon walks the Hub-wide change listing for pushes to any watched repo ("0s": never,
    # only when that is cheaper than checking the due repos one by one).
    listen_every: DurationOrZero = 60.0
    workers: Count = 4  # repos polled at the same time by one `tracker run`
    shutdown_grace: DurationOrZero = 30.0  # on SIGTERM: finish, then exit anyway


@dataclass(frozen=True, config=_STRICT)
class LimitsSettings:
    """``[limits]``: caps on what one file, one revision and the blob cache may take."""

    max_file_bytes: Count = 64 * 1024 * 1024  # cap on any tracked file read
    max_header_bytes: Count = 32 * 1024 * 1024  # cap on a safetensors header
    # One revision's analysis: range requests (all range reads together), memory of the parsed headers it
    # keeps (evicted by size), and CPU time; what does not fit is skipped and reported (analysis.budget_exceeded).
    revision_requests: Count = 200
    revision_header_bytes: Count = 256 * 1024 * 1024
    revision_cpu: Duration = 60.0
    # The file versions kept in the database (the blob cache); past it the least recently read go first,
    # except those the latest revision of a watched repo reads. Entries older than blob_cache_age go too.
    blob_cache_bytes: Count = 1024 * 1024 * 1024
    blob_cache_age: Duration = 90 * 86400.0
    # Range requests and bytes each side of a revision may spend comparing changed weights' tensors (0: off).
    weight_compare_requests: Annotated[int, BeforeValidator(_whole(0))] = 64
    weight_compare_bytes: Annotated[int, BeforeValidator(_whole(0))] = 16 * 1024 * 1024


@dataclass(frozen=True, config=_STRICT)
class AdvisoriesSettings:
    """``[advisories]``: which findings become advisories, and what a record lists."""

    min_severity: SeverityName = Severity.LOW
    max_versions: Count = 1000  # the newest affected commits a record lists
    tracker_url: PublicURL = None  # the older name of [api] public_url


@dataclass(frozen=True, config=_STRICT)
class OsvSettings:
    """``[osv]``: where dependency lookups go."""

    api_url: OptionalText = None  # None: no dependency lookups (config/tracker.toml sets OSV.dev)


@dataclass(frozen=True, config=_STRICT)
class ApiSettings:
    """``[api]``: the HTTP API (`tracker serve`)."""

    host: Text = "127.0.0.1"
    port: Port = 8080
    max_hub_requests: Count = 20  # Hub requests one query or querybatch may spend
    read_requires_token: Flag = False  # reads need a bearer token too
    public_url: PublicURL = None  # this server's address, for links (else the Host's)
    # Host headers answered when no public_url is set; empty: the address served on, and localhost.
    allowed_hosts: Hosts = ()
    on_demand_reads: Count = 2  # Hub reads (diffs, estimates) run at once for callers
    on_demand_per_client: Count = 1  # of those, for one client address


@dataclass(frozen=True, config=_STRICT)
class VerifySettings:
    """``[verify]``: `tracker verify` and the daemon's opt-in verification (docs/verify.md)."""

    enabled: Flag = False  # the daemon verifies revisions whose findings reach min_severity
    min_severity: SeverityName = Severity.HIGH
    max_bytes: Count = 2 * 1024**3  # downloaded per revision; a larger file is refused first
    max_params: Count = 1_000_000_000  # larger models are not run (tokenizers always are)
    max_memory: Count = 16 * 1024**3  # address space of the verification process
    max_cpu: Duration = 1200.0  # CPU seconds of the verification process
    timeout: Duration = 900.0  # wall clock of the verification process
    samples: Count = 32  # sample texts or prompts run through both revisions
    cache_dir: OptionalText = None  # None: verify-cache/ beside the SQLite database, else data/
    device: Annotated[str, BeforeValidator(_device)] = "cpu"  # cpu or cuda


@dataclass(frozen=True, config=_STRICT)
class Settings:
    """Every setting, with its default, one section of the file per field: ``settings.hub.timeout`` is
    ``[hub] timeout`` (and ``TRACKER_HUB_TIMEOUT``).

    To add a setting: one line in its section's class above, ``key: Type = default  # why``, then document
    it in config/tracker.toml (tests/test_docs.py checks both agree). A new section is a new class, and a
    field here whose name is the section's.
    """

    database: DatabaseSettings = field(default_factory=DatabaseSettings)  # [database]
    hub: HubSettings = field(default_factory=HubSettings)  # [hub]
    poll: PollSettings = field(default_factory=PollSettings)  # [poll]
    limits: LimitsSettings = field(default_factory=LimitsSettings)  # [limits]
    advisories: AdvisoriesSettings = field(default_factory=AdvisoriesSettings)  # [advisories]
    osv: OsvSettings = field(default_factory=OsvSettings)  # [osv]
    api: ApiSettings = field(default_factory=ApiSettings)  # [api]
    verify: VerifySettings = field(default_factory=VerifySettings)  # [verify]
    delivery: DeliverySettings = field(default_factory=DeliverySettings)  # [delivery]
    # Sections of another shape:
    watch: tuple[WatchSpec, ...] = ()  # [[watch]]
    severity: SeverityOverrides = field(default_factory=dict)  # [severity]: finding code = severity
    config_path: Path | None = None  # the file these came from (None: defaults and environment only)

    def changed(self, **sections: Any) -> Settings:
        """These settings with some keys changed, section by section: ``settings.changed(hub={"timeout": 5.0})``
        keeps the other keys of ``[hub]``. A section's object (``delivery=DeliverySettings(...)``), the watch
        list or the severity table replaces that field whole. Values are checked as when loaded."""
        changes: dict[str, Any] = {
            name: {**{f.name: getattr(getattr(self, name), f.name) for f in fields(SECTION_TYPES[name])},
                   **value}
            if name in SECTION_TYPES and isinstance(value, Mapping) else value
            for name, value in sections.items()
        }
        return replace(self, **changes)

    @property
    def is_sqlite(self) -> bool:
        return self.database.url.startswith("sqlite")

    @property
    def public_url(self) -> str | None:
        """Where links point: ``[api] public_url``, else ``[advisories] tracker_url`` (its older name)."""
        return self.api.public_url or self.advisories.tracker_url


# -- the keys, derived from the classes above ---------------------------------------------------


def _fields_of(cls: type) -> dict[str, FieldInfo]:
    fields: dict[str, FieldInfo] = cls.__pydantic_fields__  # type: ignore[attr-defined]  # set by pydantic's dataclass
    return fields

def _sections() -> dict[str, type]:
    """Section -> its class, for each field of :class:`Settings` that is a section of keys (``[hub]``...)."""
    return {name: info.default_factory for name, info in _fields_of(Settings).items()
            if isinstance(info.default_factory, type)
            and hasattr(info.default_factory, "__pydantic_fields__")}


SECTION_TYPES = _sections()
SECTIONS_WHOLE = ("watch", "severity")  # sections of another shape, each one field


def _keys() -> dict[tuple[str, str], str]:
    """(section, key) -> ``"section.key"``, the path of its field (``settings.hub.timeout``), for every key."""
    return {(section, name): f"{section}.{name}"
            for section, cls in SECTION_TYPES.items() for name in _fields_of(cls)}


KEYS = _keys()


def default(name: str) -> Any:
    """The default of the key ``"section.key"`` (for signatures that take one setting: ``default("hub.timeout")``)."""
    section, _, key_name = name.partition(".")
    return _fields_of(SECTION_TYPES[section])[key_name].default


def setting(settings: Settings, name: str) -> Any:
    """The value of the key ``"section.key"``."""
    section, _, key_name = name.partition(".")
    return getattr(getattr(settings, section), key_name)


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
    name = ".".join(loc[:2]) if loc and loc[0] in SECTION_TYPES else (loc[0] if loc else "")
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
    values: dict[str, dict[str, Any]] = {section: {} for section in SECTION_TYPES}
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
        values[section][key_name] = value
    watch = [{"repo": item} if isinstance(item, str) else item for item in data.get("watch", [])]
    try:
        # pydantic validates the plain dicts and lists into their dataclasses
        raw = {**values, "watch": watch, "severity": data.get("severity", {})}
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
    secrets = {
        f"{section}.{key_name}"
        for section, cls in SECTION_TYPES.items()
        for key_name, info in _fields_of(cls).items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("secret")
    }
    for section, entries in by_section.items():
        lines.append(f"[{section}]")
        for key_name, name in entries:
            value = setting(settings, name)
            if name == "database.url":
                value = make_url(value).render_as_string(hide_password=True)
            shown = '"********"' if name in secrets and value else _toml(value)
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

"""Configuration: every mistake in the file or the environment is one line that names the key, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.adapters.settings import KEYS, DeliverySettings, Settings, WatchSpec, env_name, load_settings
from tracker.core.errors import ConfigError
from tracker.core.model import RepoId, Severity
from tracker.surfaces.cli import main

ROOT = Path(__file__).resolve().parents[2]


def problem(tmp_path: Path, toml: str, env: dict[str, str] | None = None) -> str:
    """The one line a config with ``toml`` is refused with (the file's path left off)."""
    path = tmp_path / "t.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env=env or {})
    text = str(caught.value)
    assert "\n" not in text
    return text.removeprefix(f"{path}: ")


def check(tmp_path: Path, toml: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`tracker --config FILE config check`: (exit status, stdout, stderr)."""
    path = tmp_path / "t.toml"
    path.write_text(toml)
    env = {"HF_ENDPOINT": None, "TRACKER_CONFIG": None, **(env or {})}  # None: not in the command's environment
    result = CliRunner().invoke(main, ["--config", str(path), "config", "check"], env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ("[pol]\nevery = \"1h\"\n", "unknown section [pol] (did you mean [poll]?)"),
        ("[zzz]\n", "unknown section [zzz] (the sections are advisories, api, database, delivery, hub, limits, "
                    "osv, poll, severity, verify, watch)"),
        ("[poll]\nevry = \"1h\"\n", "[poll] evry: unknown key (did you mean every?)"),
        ("[hub]\ntimout = \"30s\"\n", "[hub] timout: unknown key (did you mean timeout?)"),
        ("[delivery]\nmax_attempt = 3\n", "[delivery] max_attempt: unknown key (did you mean max_attempts?)"),
        ("[[watch]]\nrepo = \"a/b\"\nevrey = \"1h\"\n", "[[watch]] #1 evrey: unknown key (did you mean every?)"),
        ("[severity]\n\"tokenizer.eos_token_chnged\" = \"high\"\n",
         "[severity]: unknown finding code 'tokenizer.eos_token_chnged' (did you mean tokenizer.eos_token_changed?)"),
        ("[hub]\nqqq = 1\n", "[hub] qqq: unknown key"),
    ],
)
def test_an_unknown_name_is_refused_with_the_closest_known_one(tmp_path: Path, toml: str, error: str) -> None:
    assert problem(tmp_path, toml) == error


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ('[api]\nport = "eighty"\n', "[api] port: must be a whole number from 1 to 65535, not 'eighty'"),
        ("[api]\nport = 70000\n", "[api] port: must be a whole number from 1 to 65535, not 70000"),
        ("[poll]\nworkers = 0\n", "[poll] workers: must be a whole number, at least 1, not 0"),
        ("[poll]\nworkers = true\n", "[poll] workers: must be a whole number, at least 1, not True"),
        ('[poll]\nevery = "often"\n',
         "[poll] every: invalid duration 'often': use e.g. 90s, 15m, 1h30m, 2d (a poll interval is between 1m and 31d)"),
        ('[poll]\nevery = "10s"\n', "[poll] every: invalid duration '10s': shorter than the minimum of 1m "
                                    "(a poll interval is between 1m and 31d)"),
        ('[hub]\ntimeout = "-1s"\n', "[hub] timeout: invalid duration '-1s': use e.g. 90s, 15m, 1h30m, 2d"),
        ('[advisories]\nmin_severity = "urgent"\n',
         "[advisories] min_severity: must be one of critical, high, moderate, low, info, not 'urgent'"),
        ('[severity]\n"tokenizer.eos_token_changed" = "urgent"\n',
         "[severity] tokenizer.eos_token_changed: must be one of critical, high, moderate, low, info, not 'urgent'"),
        ('[api]\nread_requires_token = "yes"\n', "[api] read_requires_token: must be true or false, not 'yes'"),
        ('[delivery]\nallow_hosts = "localhost"\n', "[delivery] allow_hosts: must be a list of host names or "
                                                   "addresses, not 'localhost'"),
        ('[hub]\nwebhook_owners = ["no/slash"]\n', "[hub] webhook_owners: invalid owner name 'no/slash': "
                                                  "use Hub user or organisation names"),
        ('[[watch]]\nrepo = "not a repo"\n', "[[watch]] #1 repo: invalid repo id 'not a repo': expected exactly "
                                            "one '/' as in 'owner/name'"),
        ("[hub]\nendpoint = 3\n", "[hub] endpoint: must be a string, not 3"),
        ("[hub]\ntimeout = {}\n", "[hub] timeout: invalid duration {}: use e.g. 90s, 15m, 1h30m, 2d"),
        ('hub = 3\n', "[hub] must be a table"),
    ],
)
def test_a_bad_value_names_its_key_and_what_is_allowed(tmp_path: Path, toml: str, error: str) -> None:
    assert problem(tmp_path, toml) == error


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("mysql://u@db/t", "the mysql database is not supported: use sqlite:///path/tracker.sqlite3 or "
                           "postgresql+psycopg://user@host/db"),
        ("not a url", "'not a url' is not a database URL: use sqlite:///path/tracker.sqlite3 or "
                      "postgresql+psycopg://user@host/db"),
        ("postgresql+asyncpg://u@db/t", "the PostgreSQL driver 'asyncpg' is not supported: use "
                                        "postgresql+psycopg://user@host/db"),
    ],
)
def test_an_unusable_database_url_is_one_line_with_the_fix(tmp_path: Path, url: str, error: str) -> None:
    assert problem(tmp_path, f'[database]\nurl = "{url}"\n') == f"[database] url: {error}"


def test_postgresql_without_its_driver_says_which_extra_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what importlib sees when the package is not installed
    code, out, err = check(tmp_path, "", env={"TRACKER_DATABASE_URL": "postgresql+psycopg://u@db/t"})
    assert (code, out) == (2, "")
    assert err == ("error: TRACKER_DATABASE_URL ([database] url): PostgreSQL needs its driver: install "
                   "upstream-tracker[postgres] (pip install 'upstream-tracker[postgres]')\n")


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        ("[poll]\nevry = \"1h\"\n", "[poll] evry: unknown key (did you mean every?)"),
        ('[api]\nport = "eighty"\n', "[api] port: must be a whole number from 1 to 65535, not 'eighty'"),
        ('[database]\nurl = "mysql://u@db/t"\n', "[database] url: the mysql database is not supported: use "
                                                 "sqlite:///path/tracker.sqlite3 or postgresql+psycopg://user@host/db"),
    ],
)
def test_the_command_exits_2_with_one_line(tmp_path: Path, toml: str, line: str) -> None:
    code, out, err = check(tmp_path, toml)
    assert (code, out, err) == (2, "", f"error: {tmp_path / 't.toml'}: {line}\n")


def test_any_command_refuses_a_bad_config_before_doing_anything(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text(f'[database]\nurl = "sqlite:///{tmp_path}/t.sqlite3"\n[pol]\n')
    result = CliRunner().invoke(main, ["--config", str(tmp_path / "t.toml"), "watch", "list"])
    assert (result.exit_code, result.stderr) == (2, f"error: {tmp_path / 't.toml'}: unknown section [pol] "
                                                    "(did you mean [poll]?)\n")
    assert not (tmp_path / "t.sqlite3").exists()


def test_the_environment_overrides_the_file_and_a_bad_value_names_the_variable(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[hub]\ntimeout = "30s"\nmax_pages = 10\n[poll]\nworkers = 2\n[api]\nread_requires_token = true\n')
    env = {"TRACKER_HUB_TIMEOUT": "5s", "TRACKER_POLL_WORKERS": "8", "TRACKER_API_READ_REQUIRES_TOKEN": "false",
           "TRACKER_HUB_WEBHOOK_OWNERS": "acme, beta", "HF_ENDPOINT": "http://mirror.test"}
    settings = load_settings(path, env=env)
    assert (settings.hub.timeout, settings.hub.max_pages, settings.poll.workers,
            settings.api.read_requires_token,
            settings.hub.webhook_owners, settings.hub.endpoint) == (5.0, 10, 8, False, ("acme", "beta"),
                                                                    "http://mirror.test")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env={"TRACKER_POLL_WORKERS": "eight"})
    assert str(caught.value) == "TRACKER_POLL_WORKERS ([poll] workers): must be a whole number, at least 1, not 'eight'"


def test_the_weight_comparison_budget_has_defaults_an_off_switch_and_names_its_variable() -> None:
    limits = load_settings(None, env={}).limits
    assert (limits.weight_compare_requests, limits.weight_compare_bytes) == (64, 16 * 1024 * 1024)
    env = {"TRACKER_LIMITS_WEIGHT_COMPARE_REQUESTS": "0", "TRACKER_LIMITS_WEIGHT_COMPARE_BYTES": "1048576"}
    settings = load_settings(None, env=env)
    assert (settings.limits.weight_compare_requests, settings.limits.weight_compare_bytes) == (0, 1048576)
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env={"TRACKER_LIMITS_WEIGHT_COMPARE_REQUESTS": "-1"})
    assert str(caught.value) == ("TRACKER_LIMITS_WEIGHT_COMPARE_REQUESTS ([limits] weight_compare_requests): "
                                 "must be a whole number, at least 0, not -1")


def test_a_misspelt_environment_variable_is_refused_like_a_misspelt_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env={"TRACKER_HUB_TIMOUT": "10s"})
    assert str(caught.value) == "TRACKER_HUB_TIMOUT: not a setting (did you mean TRACKER_HUB_TIMEOUT?)"
    # variables that are not keys, and other programs' TRACKER_ names, are left alone
    env = {"TRACKER_WEBHOOK_SECRET": "s", "TRACKER_LOG_FORMAT": "json", "TRACKER_TEST_POSTGRES_URL": "x",
           "TRACKER_DB_PASSWORD": "p"}
    assert load_settings(None, env=env).hub.timeout == 30.0


@pytest.mark.parametrize("variable, message", [
    ("TRACKER_DATABSE_URL", "TRACKER_DATABSE_URL: not a setting (did you mean TRACKER_DATABASE_URL?)"),  # the section
    ("TRACKER_DATABASE_ULR", "TRACKER_DATABASE_ULR: not a setting (did you mean TRACKER_DATABASE_URL?)"),  # the key
    ("TRACKER_LOG_FROMAT", "TRACKER_LOG_FROMAT: not a setting (did you mean TRACKER_LOG_FORMAT?)"),
])
def test_a_misspelt_section_in_a_variable_is_refused_too(variable, message) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env={variable: "sqlite:///x.sqlite3"})
    assert str(caught.value) == message


def test_every_key_has_an_environment_variable_named_after_it() -> None:
    assert env_name("hub", "budget_api_per_5min") == "TRACKER_HUB_BUDGET_API_PER_5MIN"
    assert KEYS[("database", "url")] == "database.url"
    assert KEYS[("delivery", "allow_hosts")] == "delivery.allow_hosts"
    assert KEYS[("api", "max_hub_requests")] == "api.max_hub_requests"
    assert len(KEYS) == 62  # every key of every section, [delivery] included


def test_config_check_prints_the_effective_configuration_with_secrets_masked(tmp_path: Path) -> None:
    env = {"TRACKER_DATABASE_URL": "postgresql+psycopg://tracker:hunter2@db.internal/tracker"}
    code, out, err = check(tmp_path, '[poll]\nevery = "30m"\n\n[[watch]]\nrepo = "acme/tiny"\nevery = "2h"\n'
                                     '[severity]\n"tokenizer.eos_token_changed" = "critical"\n', env=env)
    assert (code, err) == (0, "")
    assert "hunter2" not in out
    lines = out.splitlines()
    assert lines[0] == f"# {tmp_path / 't.toml'}"
    assert 'url = "postgresql+psycopg://tracker:***@db.internal/tracker"  # env TRACKER_DATABASE_URL' in lines
    assert 'every = "30m"  # file' in lines
    assert 'timeout = "30s"' in lines  # a default says nothing about where it came from
    assert 'endpoint = ""  # unset' in lines
    assert lines[lines.index("[severity]"):] == ['[severity]', '"tokenizer.eos_token_changed" = "critical"', "",
                                                 "[[watch]]", 'repo = "acme/tiny"', 'every = "2h"']


def test_the_printed_configuration_loads_back_to_the_same_settings(tmp_path: Path) -> None:
    code, out, _ = check(tmp_path, (ROOT / "config" / "tracker.toml").read_text())
    assert code == 0
    (tmp_path / "again.toml").write_text(out.replace('""  # unset', '""'))
    assert (load_settings(tmp_path / "again.toml", env={}).__dict__ | {"config_path": None}
            == load_settings(ROOT / "config" / "tracker.toml", env={}).__dict__ | {"config_path": None})


def test_built_in_code_gets_the_same_checks_and_the_same_defaults(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./config/tracker.toml: defaults only
    assert Settings() == load_settings(None, env={})
    with pytest.raises(ValueError, match="shorter than the minimum of 1m"):
        Settings(poll={"every": 1.0})
    assert Settings(delivery={"timeout": "2s"}).delivery == DeliverySettings(timeout=2.0)  # type: ignore[arg-type]
    assert Settings(watch=[{"repo": "acme/tiny"}]).watch == (WatchSpec(repo=RepoId("acme/tiny")),)  # type: ignore[list-item]
    assert Settings(advisories={"min_severity": "high"}).advisories.min_severity is Severity.HIGH  # type: ignore[arg-type]


def test_the_shipped_config_names_every_key() -> None:
    text = (ROOT / "config" / "tracker.toml").read_text()
    sections = {}
    current = None
    for line in text.splitlines():
        stripped = line.lstrip("# ").strip()
        if stripped.startswith("[") and not stripped.startswith("[["):
            current = stripped.strip("[]").split("]")[0].strip("[]")
        elif current and "=" in stripped:
            sections.setdefault(current, set()).add(stripped.split("=")[0].strip())
    missing = [f"[{s}] {k}" for s, k in KEYS if k not in sections.get(s, set())]
    assert missing == []


def test_settings_built_in_code_change_some_keys_of_a_section_and_keep_the_others() -> None:
    base = Settings(hub={"endpoint": "http://127.0.0.1:9", "timeout": "5s"})  # type: ignore[arg-type]
    changed = base.changed(hub={"max_retries": 0}, poll={"jitter": "0s"})
    assert (changed.hub.endpoint, changed.hub.timeout, changed.hub.max_retries, changed.poll.jitter) == (
        "http://127.0.0.1:9", 5.0, 0, 0.0)
    assert (base.hub.max_retries, changed.poll.every, changed.delivery) == (5, 3600.0, DeliverySettings())
    with pytest.raises(ValueError, match="shorter than the minimum of 1m"):
        base.changed(poll={"every": "1s"})

"""[verify] settings, the cache folder, and the command's arguments (no model is run)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tracker.adapters.settings import Settings, load_settings
from tracker.adapters.verify.verifying import VerifyOptions, cache_dir
from tracker.core.errors import SettingsError
from tracker.core.model import Severity
from tracker.surfaces.cli import main
from tracker.surfaces.cli.verify_command import parse_params


def test_the_defaults():
    s = Settings()
    assert (s.verify.enabled, s.verify.min_severity, s.verify.max_bytes, s.verify.max_params,
            s.verify.samples,
            s.verify.device) == (False, Severity.HIGH, 2 * 1024**3, 1_000_000_000, 32, "cpu")


def test_the_file_and_the_environment_set_them(tmp_path: Path):
    config = tmp_path / "tracker.toml"
    config.write_text('[verify]\nenabled = true\nmin_severity = "critical"\nmax_bytes = 1024\ntimeout = "2m"\n')
    s = load_settings(config, env={"TRACKER_VERIFY_DEVICE": "cuda"})
    assert (s.verify.enabled, s.verify.min_severity, s.verify.max_bytes, s.verify.timeout,
            s.verify.device) == (
        True, Severity.CRITICAL, 1024, 120.0, "cuda")


def test_a_bad_device_is_one_line_naming_the_key():
    with pytest.raises(SettingsError) as caught:
        load_settings(None, env={"TRACKER_VERIFY_DEVICE": "gpu"})
    assert str(caught.value) == "TRACKER_VERIFY_DEVICE ([verify] device): must be cpu or cuda, not 'gpu'"


@pytest.mark.parametrize(("url", "configured", "expected"), [
    ("sqlite:///data/tracker.sqlite3", None, Path("data/verify-cache")),
    ("sqlite:////srv/tracker/db.sqlite3", None, Path("/srv/tracker/verify-cache")),
    ("sqlite:///srv/tracker/db.sqlite3", "/var/cache/verify", Path("/var/cache/verify")),
    ("postgresql+psycopg://u@h/db", None, Path("data/verify-cache")),
])
def test_the_private_cache_lies_under_the_data_folder(url, configured, expected):
    assert cache_dir(Settings(database={"url": url}, verify={"cache_dir": configured})) == expected


def test_the_command_line_overrides_the_settings():
    options = VerifyOptions.from_settings(Settings(), samples=4, device=None, max_params=500_000_000)
    assert (options.samples, options.device, options.max_params, options.max_bytes) == (4, "cpu", 500_000_000,
                                                                                        2 * 1024**3)
    assert (options.limits.memory_bytes, options.limits.cpu_seconds, options.limits.wall_seconds) == (
        16 * 1024**3, 1200.0, 900.0)


@pytest.mark.parametrize(("text", "count"), [("1B", 10**9), ("500M", 5 * 10**8), ("1.5b", 15 * 10**8),
                                             ("7000000", 7_000_000), ("2k", 2000)])
def test_max_params_reads_a_count(text, count):
    assert parse_params(text) == count


@pytest.mark.parametrize("text", ["", "x", "1Q", "-1B", "0"])
def test_max_params_refuses_anything_else(text):
    with pytest.raises(click.BadParameter):
        parse_params(text)


def test_a_bad_max_params_is_a_usage_error(tmp_path: Path):
    (tmp_path / "t.toml").write_text("")
    result = CliRunner().invoke(main, ["--config", str(tmp_path / "t.toml"), "verify", "a/b", "main", "dev",
                                       "--max-params", "lots"])
    assert result.exit_code == 2
    assert "'lots' is not a parameter count: use e.g. 1B, 500M or 7000000" in result.output


@pytest.mark.parametrize("old, new, said", [
    ("main v2", "dev", "OLD must be a revision (a commit sha, a branch or a tag), not 'main v2'"),
    ("main", "  ", "NEW must be a revision (a commit sha, a branch or a tag), not '  '"),
])
def test_a_revision_that_cannot_be_one_is_a_usage_error_before_anything_runs(tmp_path: Path, old, new, said):
    (tmp_path / "t.toml").write_text("")
    result = CliRunner().invoke(main, ["--config", str(tmp_path / "t.toml"), "verify", "a/b", old, new])
    assert (result.exit_code, result.output.splitlines()[-1]) == (2, f"Error: {said}")

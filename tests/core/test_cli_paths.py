"""Every command that takes a path, given a missing, unreadable or special one: one line naming the path and
the cause (bad usage: click's usage lines and exit 2), never a traceback and never a hang."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.surfaces.cli import main


def denied(path: str) -> str:
    """What this system says when making ``path`` (a folder under /sys) is refused: EPERM as root, EACCES not."""
    try:
        os.mkdir(path)
    except OSError as exc:
        return os.strerror(exc.errno or errno.EPERM)
    raise AssertionError(f"{path} could be made")


@pytest.fixture
def run(tmp_path, monkeypatch):
    """The real command in-process, on a fresh SQLite file, with a Hub that is never asked."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x\n")
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3",
           "TRACKER_CONFIG": "", "HF_HUB_CACHE": str(tmp_path / "cache")}

    def invoke(*args: str, **more: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(main, list(args), env={**env, **more}, prog_name="tracker", catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke


def usage(command: str, message: str) -> str:
    return f"Usage: tracker {command} [OPTIONS] {{}}\nTry 'tracker {command} --help' for help.\n\nError: {message}\n"


def test_export_into_a_missing_or_refused_folder_is_one_line(run):
    assert run("export", "osv", "/proc/nope") == (1, "", "error: /proc/nope: No such file or directory\n")
    assert run("export", "osv", "/sys/kernel/x") == (1, "", f"error: /sys/kernel/x: {denied('/sys/kernel/x')}\n")
    assert run("export", "osv", "/dev/null") == (1, "", "error: /dev/null: File exists\n")
    code, out, err = run("export", "osv", "file.txt")
    assert (code, out, err.splitlines()[-1]) == (
        2, "", "Error: Invalid value for 'DIRECTORY': Directory 'file.txt' is a file.")


@pytest.mark.parametrize(("target", "message"), [
    ("./nope.json", "no such file: ./nope.json"),
    ("/proc/nope/config.json", "no such file: /proc/nope/config.json"),
    ("empty", "no such file: empty/config.json"),
    ("/dev/null", "/dev/null is not a regular file: give a config.json or a model folder"),
    ("fifo", "fifo is not a regular file: give a config.json or a model folder"),
    ("/proc/self/mem", "/proc/self/mem: Input/output error"),
])
def test_estimate_of_a_path_that_is_not_a_config(run, target, message):
    assert run("estimate", target) == (2, "", usage("estimate", f"Invalid value: {message}").format("TARGET"))


@pytest.mark.parametrize(("path", "message"), [
    ("/proc/nope", "Invalid value for 'PATH': Path '/proc/nope' does not exist."),
    ("/dev/null", "Invalid value for 'PATH': /dev/null is not a regular file or a folder"),
    ("fifo", "Invalid value for 'PATH': fifo is not a regular file or a folder"),
])
def test_scan_of_a_missing_or_special_path(run, path, message):
    assert run("scan", path) == (2, "", usage("scan", message).format("PATH"))


def test_audit_of_a_missing_or_special_cache(run):
    assert run("audit", "--cache-dir", "/proc/nope") == (
        2, "", "error: no Hugging Face cache at /proc/nope: the folder does not exist (give --cache-dir, or set "
               "HF_HUB_CACHE or HF_HOME)\n")
    assert run("audit", "--cache-dir", "/dev/null") == (
        2, "", "error: /dev/null is not a folder: --cache-dir takes the cache folder (HF_HUB_CACHE)\n")


def test_watch_add_from_a_missing_or_empty_file(run):
    assert run("watch", "add", "--from", "/proc/nope") == (2, "", usage(
        "watch add", "Invalid value for '--from': '/proc/nope': No such file or directory").format("[REPO_IDS]..."))
    assert run("watch", "add", "--from", "/dev/null") == (
        2, "", usage("watch add", "give at least one repo id, or --from FILE").format("[REPO_IDS]..."))


def test_a_config_file_that_is_missing_special_or_unreadable(run, tmp_path):
    assert run("--config", "/proc/nope", "status") == (2, "", "error: config file not found: /proc/nope\n")
    assert run("status", TRACKER_CONFIG=str(tmp_path / "fifo")) == (
        2, "", f"error: the config file {tmp_path / 'fifo'} is not a regular file: give a TOML file\n")
    assert run("status", TRACKER_CONFIG="/proc/self/mem") == (
        2, "", "error: cannot read the config file /proc/self/mem: [Errno 5] Input/output error\n")


def test_a_database_in_a_missing_folder(run):
    assert run("watch", "list", TRACKER_DATABASE_URL="sqlite:////proc/nope/t.sqlite3") == (
        1, "", "error: cannot open the database at /proc/nope/t.sqlite3: the folder /proc/nope does not exist\n")


def test_demo_keeping_its_files_in_a_missing_or_refused_folder(run):
    assert run("demo", "--keep", "/proc/nope", "--port", "0") == (1, "", "error: /proc/nope: No such file or directory\n")
    assert run("demo", "--keep", "/sys/kernel/x", "--port", "0") == (
        1, "", f"error: /sys/kernel/x: {denied('/sys/kernel/x')}\n")


def test_an_os_error_names_its_paths_and_cause():
    from tracker.surfaces.cli import os_error_line

    assert os_error_line(FileNotFoundError(2, "No such file or directory", "/a")) == "/a: No such file or directory"
    assert os_error_line(OSError(18, "Invalid cross-device link", "/a", None, "/b")) == (
        "/a to /b: Invalid cross-device link")
    assert os_error_line(OSError("disk full")) == "OSError: disk full"
    assert Path("/proc/self/mem").exists()

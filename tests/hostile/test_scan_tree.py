"""``tracker scan`` on hostile trees: none hangs it, crashes it, or stops it reading the real files.

Before: a ``.gitignore`` line of 40 ``*`` made pathspec's regex backtrack (3 s per path at 32
stars, past a 300 s timeout at 40); a FIFO named ``pipe.py`` blocked ``open()`` forever; 1,100
nested folders raised ``RecursionError``; a folder with mode 000 raised ``PermissionError``.

Each case runs the real CLI in a child process under a 3 GiB address-space cap and a timeout,
against the Hub stand-in, with one real reference in the tree: the scan must exit 0, list that
reference (the real file was read past the hostile entries), and list the hostile entry under
``skipped`` with its reason. Tests run as root here, which mode 000 does not stop: the mode-000
child drops the two capabilities that let root through (``CAP_DAC_OVERRIDE``,
``CAP_DAC_READ_SEARCH``) and stays root otherwise, so the permission check is the kernel's own.
A directory removed while the walk runs makes ``os.scandir`` fail for anyone, and is the second
reproduction.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.content_support import ROOT
from tracker.pipeline.scan.files import MAX_DEPTH, MAX_IGNORE_PATTERNS, walk
from tracker.pipeline.scan.model import Skipped

MEMORY = 3 * 1024 * 1024 * 1024
PIN = "0123456789abcdef0123456789abcdef01234567"
REAL = f'from transformers import AutoModel\nAutoModel.from_pretrained("acme/real", revision="{PIN}")\n'


@pytest.fixture
def tree() -> Iterator[Path]:
    """A folder holding the one real reference; removed without recursion (it may be 1,100 levels deep)."""
    folder = Path(tempfile.mkdtemp(prefix="hostile-scan-"))
    (folder / "real.py").write_text(REAL)
    yield folder
    remove_tree(folder)


def remove_tree(folder: Path) -> None:
    """``shutil.rmtree`` without its recursion (Python 3.11's dies at ~1,000 levels), mode 000 undone first."""
    folders, stack = [], [folder]
    while stack:
        current = stack.pop()
        os.chmod(current, 0o755)
        folders.append(current)
        with os.scandir(current) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    os.unlink(entry.path)
    for current in reversed(folders):
        os.rmdir(current)


def nested(top: Path, depth: int) -> Path:
    """``top/d/d/.../d``, ``depth`` levels, made one by one (``mkdir(parents=True)`` recurses too)."""
    path = top
    for _ in range(depth):
        path = path / "d"
        path.mkdir(exist_ok=True)
    return path


CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
_CAPABILITY_VERSION_3 = 0x20080522
_PR_CAPBSET_DROP = 24


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_dac_capabilities() -> None:
    """Make this process and what it runs subject to file modes even as root.

    The two capabilities leave the bounding set (prctl(2) ``PR_CAPBSET_DROP``), or ``exec`` as root
    would grant them again, and this process's own sets (capset(2)).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    mask = ~((1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)) & 0xFFFFFFFF
    data[0].effective &= mask
    data[0].permitted &= mask
    data[0].inheritable &= mask
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def scan(hub_standin, folder: Path, *, modes_bind_root: bool = False, timeout: float = 120) -> dict:
    """``tracker scan FOLDER --format json`` in a child under the memory cap; its JSON report."""
    home = Path(tempfile.mkdtemp(prefix="hostile-home-"))
    (home / "tracker.toml").write_text("")

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        if modes_bind_root:
            drop_dac_capabilities()

    env = {**os.environ, "HF_ENDPOINT": hub_standin.url, "HOME": str(home), "HF_HOME": str(home / "hf"),
           "TRACKER_DATABASE_URL": f"sqlite:///{home}/none.sqlite3", "TRACKER_CONFIG": str(home / "tracker.toml")}
    try:
        done = subprocess.run([sys.executable, "-m", "tracker", "scan", str(folder), "--format", "json"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=limits,
                              check=False)
    finally:
        shutil.rmtree(home)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def real_reference_read(report: dict) -> bool:
    return [(r["file"], r["repo"], r["revision"]) for r in report["references"]] == [("real.py", "acme/real", PIN)]


@pytest.fixture
def hub(hub_standin):
    hub_standin.create_repo("acme/real")
    hub_standin.commit("acme/real", {"config.json": b"{}"})
    return hub_standin


# ---------------------------------------------------------------------------- .gitignore


@pytest.mark.timeout(60)  # pathspec's regex backend took 3 s per path at 32 stars: 10,000 paths would take hours
def test_forty_star_patterns_against_ten_thousand_paths(tmp_path):
    (tmp_path / ".gitignore").write_text("\n".join([
        "*" * 40 + "_x.py",                   # the attack: 40 stars before a literal
        "a" + "*a" * 20 + "b.py",             # alternating stars and literals, the other backtracking shape
        "**/" + "*" * 40 + "/**/" + "*" * 40 + "_y.py",
    ]) + "\n")
    for i in range(10_000):
        suffix = "_x.py" if i % 10 == 0 else ".py"
        (tmp_path / f"{'a' * 30}{i:05d}{suffix}").touch()
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "inner_y.py").touch()
    (tmp_path / "deep" / "inner.py").touch()

    found = list(walk(tmp_path))

    assert all(not isinstance(item, Skipped) for item in found)
    names = [item.relative for item in found if not isinstance(item, Skipped)]
    assert len(names) == 9_000 + 1
    assert names[-1] == "deep/inner.py"
    assert not any(name.endswith(("_x.py", "_y.py")) for name in names)


def test_a_gitignore_over_its_caps_or_that_re2_cannot_compile_is_noted_and_the_scan_goes_on(tmp_path):
    for name, text in {
        "huge": "x" * 50_000 + "\nkept.py\n",              # past RE2's program budget
        "long": "".join(f"build{i}/\n" for i in range(MAX_IGNORE_PATTERNS + 1)) + "kept.py\n",
        "odd": "bad\\\n[z-a]\n# a comment\nignored.py\n",  # lines git cannot match are dropped, as git does
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / ".gitignore").write_text(text)
        (tmp_path / name / "kept.py").touch()
        (tmp_path / name / "ignored.py").touch()
    found = list(walk(tmp_path))
    assert [(f.file, f.reason) if isinstance(f, Skipped) else f.relative for f in found] == [
        ("huge/.gitignore", "not applied: failed to compile Set"), "huge/ignored.py", "huge/kept.py",
        ("long/.gitignore", f"not applied: {MAX_IGNORE_PATTERNS + 2:,} patterns, over the cap of 2,000"),
        "long/ignored.py", "long/kept.py",
        "odd/kept.py"]


# ---------------------------------------------------------------------------- files that are not files


@pytest.mark.timeout(180)
def test_a_fifo_named_pipe_py_never_blocks_the_scan(hub, tree):
    os.mkfifo(tree / "pipe.py")
    (tree / "sub").mkdir()
    os.mkfifo(tree / "sub" / ".gitignore")  # the walk reads every .gitignore too
    (tree / "sub" / "also.py").write_text(REAL.replace("acme/real", "acme/other"))
    (tree / "sub" / "ignored.py").write_text(REAL)

    report = scan(hub, tree)

    assert report["skipped"] == [{"file": "pipe.py", "reason": "cannot read: not a regular file (a named pipe)"}]
    assert [(r["file"], r["repo"]) for r in report["references"]] == [("real.py", "acme/real"),
                                                                      ("sub/also.py", "acme/other"),
                                                                      ("sub/ignored.py", "acme/real")]
    assert stat.S_ISFIFO(os.lstat(tree / "pipe.py").st_mode)


# ---------------------------------------------------------------------------- deep and unreadable folders


@pytest.mark.timeout(180)
def test_eleven_hundred_nested_folders_stop_at_the_depth_cap_with_a_note(hub, tree):
    deep = nested(tree, 1_100)
    (deep / "bottom.py").write_text(REAL)
    reachable = nested(tree, MAX_DEPTH)
    (reachable / "within.py").write_text(REAL.replace("acme/real", "acme/within"))

    report = scan(hub, tree)

    assert [(r["file"], r["repo"]) for r in report["references"]] == [
        ("d/" * MAX_DEPTH + "within.py", "acme/within"), ("real.py", "acme/real")]
    assert report["skipped"] == [{"file": "d/" * (MAX_DEPTH + 1), "reason": f"deeper than {MAX_DEPTH} folders; not read"}]


@pytest.mark.timeout(180)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="capset(2) is Linux's")
def test_a_folder_with_mode_000_is_a_skipped_entry(hub, tree):
    locked = tree / "locked"
    locked.mkdir()
    (locked / "secret.py").write_text(REAL)
    os.chmod(locked, 0)

    report = scan(hub, tree, modes_bind_root=os.geteuid() == 0)  # root reads through mode 000 otherwise

    assert real_reference_read(report)
    assert report["skipped"] == [{"file": "locked/", "reason": "cannot read folder: Permission denied"}]


def test_a_folder_removed_while_the_walk_runs_is_a_skipped_entry(tmp_path):
    (tmp_path / "a.py").touch()
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "b.py").touch()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "c.py").touch()
    items = walk(tmp_path)
    assert next(items).relative == "a.py"  # type: ignore[union-attr]
    shutil.rmtree(tmp_path / "gone")  # listed by its parent, not yet read

    rest = [(i.file, i.reason) if isinstance(i, Skipped) else i.relative for i in items]

    assert rest == [("gone/", "cannot read folder: No such file or directory"), "kept/c.py"]

"""`tracker audit` stays in the cache: links out of it are not followed, refs are read without blocking, at most
1 KiB, and one bad entry is skipped with one line while the rest is audited and judged by ``--fail-on``.

Each case copies the real cache of ``conftest.machine`` (filled from the Hub stand-in) and plants one hostile
entry in it.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.audit.conftest import CHAT, RISKY
from tracker.pipeline.audit import cache as cache_module
from tracker.surfaces.cli import main

CHAT_FOLDER = "models--acme--chat-model"


def audit(env, *args):
    return CliRunner().invoke(main, ["audit", *map(str, args)], env=env)


@pytest.fixture
def cache(machine, tmp_path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(machine.cache, copy, symlinks=True)
    return copy.resolve()


def skipped_of(out) -> dict[str, str]:
    assert out.exit_code in (0, 1), out.output
    return {s["name"]: s["reason"] for s in json.loads(out.output)["skipped"]}


def audited(out) -> list[tuple[str, str, list[str]]]:
    return sorted((x["repo"], x["revision"], x["refs"]) for x in json.loads(out.output)["revisions"])


def every_revision(machine) -> list[tuple[str, str, list[str]]]:
    return sorted([(CHAT, machine.chat[0], []), (CHAT, machine.chat[2], ["main"]), (RISKY, machine.risky[1], ["main"])])


HAND_LAID = {"dataset/acme/data": "a dataset: the tracker follows models",
             "gpt2": "a canonical id without an owner: the tracker follows owner/name repos"}


@pytest.mark.parametrize("where", ["outside", "root"])
def test_a_snapshot_linked_out_of_the_cache_is_skipped_naming_the_link(machine, cache, tmp_path, where):
    target = tmp_path / "opt"
    if where == "outside":  # a folder of files elsewhere on the machine, as /opt
        for n in range(50):
            (target / f"pkg{n}").mkdir(parents=True)
            (target / f"pkg{n}" / "lib.so").write_bytes(b"\0" * 1000)
    else:
        target = Path("/")
    sha = "e" * 40
    (cache / CHAT_FOLDER / "snapshots" / sha).symlink_to(target)
    out = audit(machine.env, "--cache-dir", cache, "--format", "json")
    assert out.exit_code == 0, out.output
    assert skipped_of(out) == {**HAND_LAID, f"{CHAT}@{sha}": (
        f"{CHAT_FOLDER}/snapshots/{sha} is a link to {target}, outside the cache: not followed")}
    assert audited(out) == every_revision(machine)


def test_a_repo_folder_and_a_file_linked_out_of_the_cache_are_skipped(machine, cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(cache / "models--acme--risky", elsewhere, symlinks=True)
    shutil.rmtree(cache / "models--acme--risky")
    (cache / "models--acme--risky").symlink_to(elsewhere)
    snapshot = cache / CHAT_FOLDER / "snapshots" / machine.chat[0]
    (snapshot / "config.json").unlink()
    (snapshot / "config.json").symlink_to("/etc/passwd")
    out = audit(machine.env, "--cache-dir", cache, "--format", "json")
    assert out.exit_code == 0, out.output
    assert skipped_of(out) == {
        **HAND_LAID,
        "models--acme--risky": f"a link to {elsewhere}, outside the cache: not followed",
        f"{CHAT}@{machine.chat[0]}": (f"{CHAT_FOLDER}/snapshots/{machine.chat[0]}/config.json is a link to "
                                     "/etc/passwd, outside the cache: not followed"),
    }
    assert audited(out) == [(CHAT, machine.chat[2], ["main"])]


def _fifo(path: Path) -> str:
    path.unlink()
    os.mkfifo(path)
    return "a ref that cannot be read: not a regular file (a FIFO)"


def _dev_zero(path: Path) -> str:
    path.unlink()
    path.symlink_to("/dev/zero")
    return "a ref that cannot be read: a link to /dev/zero, outside the cache: not followed"


def _loop(path: Path) -> str:
    path.unlink()
    path.symlink_to("main")
    return "a ref that cannot be read: a link that loops"


def _long(path: Path) -> str:
    path.write_text("a" * 40 + "\n" * 2000)
    return "a ref that cannot be read: longer than 1024 bytes (a ref holds a commit sha)"


def _unreadable(path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    # EACCES in a shared cache; the tests may run as root, whom a chmod does not stop, so the fault is made here.
    real = os.open

    def refusing(name, flags, *args, **kwargs):
        if Path(name) == path:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(name))
        return real(name, flags, *args, **kwargs)

    monkeypatch.setattr(cache_module.os, "open", refusing)
    return "a ref that cannot be read: permission denied"


@pytest.mark.parametrize("plant", [_fifo, _dev_zero, _loop, _long, _unreadable])
def test_a_bad_ref_is_skipped_with_one_line_and_the_rest_audited(machine, cache, plant, monkeypatch):
    ref = cache / CHAT_FOLDER / "refs" / "main"
    reason = plant(ref, monkeypatch) if plant is _unreadable else plant(ref)
    out = audit(machine.env, "--cache-dir", cache, "--format", "json")
    assert skipped_of(out) == {**HAND_LAID, f"{CHAT_FOLDER}/refs/main": reason}
    assert audited(out) == sorted([(CHAT, machine.chat[0], []), (CHAT, machine.chat[2], []),
                                   (RISKY, machine.risky[1], ["main"])])

    text = audit(machine.env, "--cache-dir", cache)
    assert text.exit_code == 0, text.output
    assert f"{CHAT_FOLDER}/refs/main  skipped: {reason}" in text.output.splitlines()
    assert "Traceback" not in text.output


def test_the_rest_is_judged_by_fail_on(machine, cache):
    _loop(cache / CHAT_FOLDER / "refs" / "main")
    (cache / "models--acme--risky" / "snapshots" / ("f" * 40)).symlink_to("/")
    assert audit(machine.env, "--cache-dir", cache, "--fail-on", "low").exit_code == 1  # risky@k1: critical
    out = audit(machine.env, "--cache-dir", cache, "--fail-on", "stale", "--format", "json")
    assert out.exit_code == 1, out.output
    assert [x["failing"] for x in json.loads(out.output)["revisions"] if x["failing"]] == [["2 behind its branch"]]
    shutil.rmtree(cache / "models--acme--risky" / "snapshots" / machine.risky[1])
    (cache / "models--acme--risky" / "refs" / "main").unlink()
    shutil.rmtree(cache / CHAT_FOLDER / "snapshots" / machine.chat[0])
    out = audit(machine.env, "--cache-dir", cache, "--fail-on", "low", "--fail-on", "stale")
    assert out.exit_code == 0, out.output  # a skipped entry alone does not fail the audit


def test_a_ref_to_a_snapshot_the_cache_lacks_is_skipped_and_the_repo_audited(machine, cache):
    (cache / CHAT_FOLDER / "refs" / "v1").write_text("0" * 40)
    out = audit(machine.env, "--cache-dir", cache, "--format", "json")
    assert skipped_of(out) == {**HAND_LAID, f"{CHAT_FOLDER}/refs/v1": f"a ref to {'0' * 40!r}, which the cache "
                                                                       "does not hold"}
    assert audited(out) == every_revision(machine)


def test_a_cache_linked_to_from_elsewhere_is_audited_where_it_is(machine, cache, tmp_path):
    """The cache folder itself may be a link (``~/.cache/huggingface`` on another disk): it is the root."""
    (tmp_path / "link").symlink_to(cache)
    out = audit(machine.env, "--cache-dir", tmp_path / "link", "--format", "json")
    assert (out.exit_code, skipped_of(out), audited(out)) == (0, HAND_LAID, every_revision(machine))
    assert json.loads(out.output)["cache"] == str(cache)


def test_only_the_hub_adapter_imports_huggingface_hub():
    """The audit walks the cache itself; huggingface_hub stays behind ``tracker/adapters/hub`` (lazy imports too)."""
    package = Path(cache_module.__file__).parents[2]
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(package)}: {name}" for name in names if name.split(".")[0] == "huggingface_hub"]
    assert found, "the check sees the hub adapter's imports"
    assert [line for line in found if not line.startswith("adapters/hub/")] == []


def test_a_snapshot_nested_past_the_depth_cap_is_skipped(machine, cache):
    snapshot = cache / CHAT_FOLDER / "snapshots" / machine.chat[0]
    deep = snapshot.joinpath(*["d"] * 70)
    deep.mkdir(parents=True)
    (deep / "config.json").write_text("{}")
    out = audit(machine.env, "--cache-dir", cache, "--format", "json")
    assert out.exit_code == 0, out.output
    nested = "/".join(["d"] * 65)
    assert skipped_of(out) == {**HAND_LAID, f"{CHAT}@{machine.chat[0]}": (
        f"{CHAT_FOLDER}/snapshots/{machine.chat[0]}/{nested}: folders nested deeper than 64")}
    assert audited(out) == sorted([(CHAT, machine.chat[2], ["main"]), (RISKY, machine.risky[1], ["main"])])


def test_on_a_healthy_cache_the_walk_reads_what_huggingface_hub_reads(machine):
    """Same layout rules: every model revision with the refs, size, file count and times ``scan_cache_dir`` gives."""
    from huggingface_hub import scan_cache_dir

    from tracker.pipeline.audit.cache import read_cache

    info = scan_cache_dir(machine.cache)
    theirs = sorted((repo.repo_id, rev.commit_hash, tuple(sorted(rev.refs)), rev.size_on_disk, len(rev.files),
                     int(rev.last_modified))
                    for repo in info.repos if repo.repo_type == "model" and "/" in repo.repo_id
                    for rev in repo.revisions)
    ours = sorted((r.repo, r.sha, r.refs, r.size, r.files, int(r.last_modified.timestamp()))
                  for r in read_cache(machine.cache).revisions)
    assert ours == theirs and len(ours) == 3

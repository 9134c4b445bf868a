"""Helpers for the hostile-content tests: a bounded subprocess, crafted pickles and zips.

``run_bounded`` runs Python code (or the real ``tracker`` CLI) in a child process whose
address space is capped with ``RLIMIT_AS``: a crafted file that makes the analysis build
gigabytes then fails with ``MemoryError`` in the child instead of taking the test machine
down, and a hang is cut by the timeout. The child prints JSON on its last line.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import resource
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


@dataclass(frozen=True)
class Bounded:
    returncode: int
    stdout: str
    stderr: str

    def result(self) -> Any:
        """The JSON the child printed last."""
        assert self.returncode == 0, self.stderr[-2000:]
        return json.loads(self.stdout.strip().splitlines()[-1])


def peak_mb() -> int:
    """This process's peak resident set, in MiB, since its last exec.

    ``ru_maxrss`` will not do in a child: Linux keeps it across ``fork`` and ``exec``, so a
    child of a large pytest process starts with the parent's figure.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_bounded(args: list[str], *, memory: int, timeout: float, cwd: Path = ROOT,
                env: dict[str, str] | None = None) -> Bounded:
    """Run ``args`` (argv) under an address-space limit of ``memory`` bytes and a wall-clock ``timeout``;
    ``env``: variables added to this process's environment."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=limit,
                          check=False, env={**os.environ, **env} if env else None)
    return Bounded(done.returncode, done.stdout, done.stderr)


def run_python(code: str, *, memory: int, timeout: float, env: dict[str, str] | None = None) -> Bounded:
    """``code`` (dedented) in a fresh interpreter under the limits; it prints its result as JSON."""
    return run_bounded([sys.executable, "-c", textwrap.dedent(code)], memory=memory, timeout=timeout, env=env)


def run_tracker(*argv: str, memory: int, timeout: float) -> Bounded:
    """The real CLI, ``python -m tracker ARGV``, under the limits."""
    return run_bounded([sys.executable, "-m", "tracker", *argv], memory=memory, timeout=timeout)


class Reduce:
    """Pickles to ``func(*args)``: what a malicious checkpoint holds (never unpickled here)."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.func, self.args


def dangerous_pickle(protocol: int = 2) -> bytes:
    import os

    return pickle.dumps({"state": Reduce(os.system, "id")}, protocol=protocol)


def harmless_pickle(n: int) -> bytes:
    import collections

    return pickle.dumps(collections.OrderedDict(layer=n), protocol=2)


def torch_like_zip(members: dict[str, bytes], *, data_size: int = 0) -> bytes:
    """A PyTorch-style zip: the pickle members given, then one tensor-data member of ``data_size`` bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if data_size:
            zf.writestr("archive/data/0", b"\0" * data_size)
    return buf.getvalue()

"""Runs :mod:`.worker` in a subprocess within an address-space, CPU-time and wall-clock limit.

The worker sets its own ``RLIMIT_AS`` and ``RLIMIT_CPU`` before importing torch; this side kills its
whole process group at the wall-clock limit and turns every way it can end into one line:
a MemoryError (or a C++ allocation failure that aborts it) at the memory cap, SIGXCPU at the CPU
limit, the kill at the timeout, or the library's own error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.adapters.hub.verify_fetching import VerifyError

WORKER = Path(__file__).with_name("worker.py")
_MAX_ANSWER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    cpu_seconds: float
    wall_seconds: float


def _gib(size: int) -> str:
    return f"{size / 1024**3:g} GiB"


def _environment() -> dict[str, str]:
    """The worker's environment: offline, no token, no telemetry, and no user site packages."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "2", "PYTHONHASHSEED": "0",
                "TRANSFORMERS_VERBOSITY": "error"})
    return env


def run_worker(request: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """The worker's answer (``{"ok": True, "old": ..., "new": ..., "libraries": ...}``), or VerifyError."""
    with tempfile.TemporaryDirectory(prefix="tracker-verify-") as scratch:
        answer_path = Path(scratch) / "answer.json"
        payload = json.dumps({**request, "answer": str(answer_path)}).encode("utf-8")
        env = {**_environment(), "HF_HOME": str(Path(scratch) / "hf-home")}
        cmd = [sys.executable, "-I", str(WORKER), str(limits.memory_bytes), str(max(1, int(limits.cpu_seconds)))]
        err_path = Path(scratch) / "stderr"
        # The libraries' messages go to a file, not a pipe: however much they write, only its end is read.
        with err_path.open("wb") as err, subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=scratch,
                start_new_session=True) as proc:
            try:
                proc.communicate(payload, timeout=limits.wall_seconds)
            except subprocess.TimeoutExpired:
                _kill(proc)
                raise VerifyError(
                    f"the verification ran past its wall-clock limit of {limits.wall_seconds:g} s "
                    "([verify] timeout) and was stopped") from None
        if not answer_path.exists():
            raise VerifyError(_ended(proc.returncode, _tail(err_path), limits))
        if answer_path.stat().st_size > _MAX_ANSWER_BYTES:
            raise VerifyError(f"the verification's answer is larger than {_MAX_ANSWER_BYTES // 1024**2} MiB: "
                              "run fewer --samples")
        answer: dict[str, Any] = json.loads(answer_path.read_text("utf-8"))
        return _checked(answer, limits)


def _tail(path: Path, size: int = 4096) -> bytes:
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - size))
        return f.read()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _checked(answer: dict[str, Any], limits: Limits) -> dict[str, Any]:
    if answer.get("ok"):
        return answer
    if answer.get("error") == "memory":
        raise VerifyError(
            f"the model needs more memory than [verify] max_memory allows ({_gib(limits.memory_bytes)}): "
            f"{answer.get('message')}")
    raise VerifyError(f"the library failed to run the revision: {answer.get('message')}")


def _ended(code: int, err: bytes, limits: Limits) -> str:
    """Why a worker that wrote no answer ended, in one line."""
    last = next((line for line in reversed(err.decode("utf-8", "replace").splitlines()) if line.strip()), "")
    if code == -signal.SIGXCPU or code == -signal.SIGKILL and "CPU" in last:
        return f"the verification used more than {limits.cpu_seconds:g} CPU seconds ([verify] max_cpu) and was stopped"
    if code in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGKILL) or "alloc" in last.lower():
        return (f"the verification process ended (exit status {code}) at the memory cap of "
                f"{_gib(limits.memory_bytes)} ([verify] max_memory): {last[:200] or 'no message'}")
    return f"the verification process ended without an answer (exit status {code}): {last[:200] or 'no message'}"

"""Servers for the hostile-Hub tests: a second origin that records what reaches it, and a drip server.

Both are real local HTTP servers on their own port (so another origin than the stand-in's). And a
flood of commits, written into the stand-in's git repository (tests/hostile/test_commit_flood.py and
bench/bench_commit_flood.py).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hubstandin import HubStandin

TOKEN = "hf_hostile_test_token_0123456789"

Answer = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names


class Recorder:
    """A second origin: answers every request with ``answer(method, path)`` and records it."""

    def __init__(self, answer: Callable[[str, str], Answer]) -> None:
        self.answer = answer
        self.seen: list[Seen] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                recorder.seen.append(Seen(self.command, self.path, headers))
                status, out, body = recorder.answer(self.command, self.path)
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **out}.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = _reply

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def authorizations(self) -> list[str]:
        return [s.headers["authorization"] for s in self.seen if "authorization" in s.headers]


@contextmanager
def drip_server(interval: float) -> Iterator[str]:
    """An origin that reads a request, then sends its answer's *status line* one byte per ``interval``."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)  # a busy machine may take a while to send the request
            try:
                while b"\r\n\r\n" not in conn.recv(65536):
                    pass
            except OSError:
                return
            for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"x" * 100_000:
                if stop.wait(interval):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


def json_answer(data: object, status: int = 200, **headers: str) -> Answer:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(data).encode()


def make_repo(hub: HubStandin, repo: str = "acme/tiny", commits: int = 1) -> list[str]:
    """A public repo with ``commits`` commits of config.json; their shas, oldest first."""
    hub.create_repo(repo)
    return [hub.commit(repo, {"config.json": json.dumps({"n": i}).encode()}, message=f"c{i}") for i in range(commits)]


def write_flood(hub_standin: HubStandin, repo: str, count: int) -> str:
    """``count`` commits on main, each changing ``notes.txt``; the last also fixes eos. Returns the head.

    Written straight into the stand-in's git repository with ``git fast-import`` (thousands of commits in
    seconds, where the stand-in's one-commit API takes a fraction of a second each)."""
    store = hub_standin.store
    parent = store.resolve(repo, "main")
    chunks = []
    for k in range(count):
        last = k == count - 1
        message = b"fix eos\n" if last else f"flood {k}\n".encode()
        body = f"{k}\n".encode()
        chunks.append(b"commit refs/heads/main\n" + f"mark :{k + 1}\n".encode()
                      + f"committer flood <flood@example.org> {1_800_000_000 + k} +0000\n".encode()
                      + f"data {len(message)}\n".encode() + message
                      + (f"from {parent}\n" if k == 0 else f"from :{k}\n").encode()
                      + f"M 100644 inline notes.txt\ndata {len(body)}\n".encode() + body)
        if last:
            eos = b'{"eos_token_id": [1, 2]}'
            chunks.append(f"M 100644 inline generation_config.json\ndata {len(eos)}\n".encode() + eos)
    subprocess.run(["git", "--git-dir", str(store.git_dir(repo)), "fast-import", "--quiet", "--force"],
                   input=b"\n".join(chunks) + b"\n", check=True)
    head = subprocess.run(["git", "--git-dir", str(store.git_dir(repo)), "rev-parse", "refs/heads/main"],
                          capture_output=True, check=True).stdout.decode().strip()
    store.set_ref(repo, "refs/heads/main", head)  # the stand-in's caches follow the new head
    return head

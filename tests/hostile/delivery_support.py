"""Hostile receivers for the delivery tests: real HTTP servers that drip, bloat or bomb their answers.

Each records what it did: the connections it is still dripping into (``open``), and how many body
bytes it managed to write before the sender hung up (``written``). None allocates what it sends:
a gigabyte body is the same 64 KiB written again and again, a gzip bomb is compressed once per
test session, in pieces.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GiB = 1 << 30
CHUNK = b"A" * 65536


@cache
def gzip_bomb(inflated: int = GiB) -> bytes:
    """``inflated`` bytes of ``A`` as gzip (about a thousandth of that), compressed a piece at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    out = [packer.compress(CHUNK) for _ in range(inflated // len(CHUNK))]
    out.append(packer.flush())
    return b"".join(out)


@dataclass
class Hostile:
    """A receiver answering its first ``hostile`` requests with ``behaviour``, then 200 at once.

    Behaviours: ``drip-headers`` (the status line and headers, one byte a second), ``drip-body``
    (500 and a body, one byte a second), ``big-body`` (500 and a 1 GiB body, as fast as it is
    read), ``gzip-bomb`` (500 and 1 GiB of gzip-inflated ``A``). A drip lasts ``hold`` seconds
    unless the sender hangs up first.
    """

    behaviour: str
    hostile: int = 1
    hold: float = 600.0
    requests: int = 0
    open: int = 0
    written: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/hook")

    def start(self) -> Hostile:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.lock:
                    receiver.requests += 1
                    hostile = receiver.requests <= receiver.hostile
                if not hostile:
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    return
                sent = 0
                try:
                    sent = getattr(receiver, "_" + receiver.behaviour.replace("-", "_"))(self)
                except OSError:  # the sender hung up: what it cost is in written
                    sent = getattr(self, "sent", 0)
                finally:
                    with receiver.lock:
                        receiver.written.append(sent)
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def _drip(self, handler: Any, data: bytes) -> int:
        with self.lock:
            self.open += 1
        try:
            end = time.monotonic() + self.hold
            for n, byte in enumerate(data):
                if time.monotonic() >= end:
                    return n
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                handler.sent = n + 1
                time.sleep(1.0)
            return len(data)
        finally:
            with self.lock:
                self.open -= 1

    def _drip_headers(self, handler: Any) -> int:
        head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + b"X-Slow: " + b"s" * 4000 + b"\r\n\r\nok"
        return self._drip(handler, head)

    def _drip_body(self, handler: Any) -> int:
        handler.send_response(500)
        handler.send_header("Content-Length", str(4000))
        handler.end_headers()
        handler.wfile.flush()
        return self._drip(handler, b"x" * 4000)

    def _big_body(self, handler: Any) -> int:
        handler.send_response(500)
        handler.send_header("Content-Length", str(GiB))
        handler.end_headers()
        handler.sent = 0
        for _ in range(GiB // len(CHUNK)):
            handler.wfile.write(CHUNK)
            handler.sent += len(CHUNK)
        return GiB

    def _gzip_bomb(self, handler: Any) -> int:
        bomb = gzip_bomb()
        handler.send_response(500)
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        handler.sent = 0
        for start in range(0, len(bomb), len(CHUNK)):
            handler.wfile.write(bomb[start:start + len(CHUNK)])
            handler.sent += min(len(CHUNK), len(bomb) - start)
        return len(bomb)


def started(behaviour: str, **kwargs: Any) -> Hostile:
    return Hostile(behaviour, **kwargs).start()


def snapshot(receivers: dict[str, Hostile]) -> Callable[[], dict[str, int]]:
    """A function telling how many connections each receiver is dripping into right now."""
    def take() -> dict[str, int]:
        return {name: r.open for name, r in receivers.items()}
    return take


@dataclass
class Honest:
    """A receiver that verifies each alert's signature, answers 200 at once, and notes at each arrival
    what ``watch()`` says (how the hostile receivers stand at that moment)."""

    secret: str
    watch: Callable[[], dict[str, int]]
    arrivals: list[tuple[str, bool, dict[str, int]]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Honest:
        from standardwebhooks import Webhook, WebhookVerificationError

        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    Webhook(receiver.secret).verify(body, headers)
                    verified = True
                except WebhookVerificationError:
                    verified = False
                receiver.arrivals.append((headers.get("webhook-id", ""), verified, receiver.watch()))
                self.send_response(200 if verified else 400)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

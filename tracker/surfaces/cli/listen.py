"""The address ``tracker run`` and ``tracker serve`` listen on, checked before anything starts.

A busy port found only when uvicorn binds, after the first polls, leaves a daemon half up; here
it is one line and exit 1, before the database or the Hub is touched.
"""

from __future__ import annotations

import errno
import socket

from tracker.core.errors import TrackerError


class CannotListen(TrackerError):
    """The HTTP API cannot listen where it is asked to (exit 1, one line)."""


def check_listen(host: str, port: int) -> None:
    """Raise CannotListen unless ``host:port`` can be bound now (as uvicorn binds it: SO_REUSEADDR)."""
    if not 1 <= port <= 65535:
        raise CannotListen(f"port {port} is out of range: give 1-65535 (--port, or [api] port in the config)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise CannotListen(f"cannot listen on {host}:{port}: unknown address ({exc})") from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            why = ("the port is already in use (another tracker run or serve?)" if exc.errno == errno.EADDRINUSE
                   else exc.strerror or str(exc))
            raise CannotListen(f"cannot listen on {host}:{port}: {why}; free it or pick another with --port") from None

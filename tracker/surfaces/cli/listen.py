"""The address ``tracker run`` and ``tracker serve`` listen on, checked before anything starts, and
``tracker serve``'s server.

A busy port found only when uvicorn binds, after the first polls, leaves a daemon half up; here
it is one line and exit 1, before the database or the Hub is touched.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
from typing import TYPE_CHECKING

from tracker.core.errors import TrackerError

if TYPE_CHECKING:
    from fastapi import FastAPI


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


def serve_app(app: FastAPI, host: str, port: int) -> None:
    """Serve ``app`` (its lifespan opens and closes its Tracker) until SIGTERM or SIGINT, then return.

    uvicorn shuts down gracefully on either signal and then raises it again, as the default action
    would (the process would end by the signal); the handlers installed here take it instead, so a
    clean stop exits 0. A tracker error opening the Tracker (the database is away, say) is raised
    here, as one line and exit 1, and uvicorn's own report of the failed start is left out.
    """
    import uvicorn

    # logging is ours (tracker/surfaces/logs.py)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, log_level=None))

    def stop(_signum: int, _frame: object) -> None:  # uvicorn's own handler is installed while it serves
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    errors = logging.getLogger("uvicorn.error")

    def startup_reported(record: logging.LogRecord) -> bool:
        return app.state.startup_error is None

    errors.addFilter(startup_reported)
    try:
        server.run()
    except SystemExit:  # uvicorn's answer to a failed start
        if app.state.startup_error is None:
            raise
    finally:
        errors.removeFilter(startup_reported)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if app.state.startup_error is not None:
        raise app.state.startup_error

"""The ``tracker`` console script: Ctrl-C is handled from its first instruction, before anything heavy is imported.

The first SIGINT hands over to the running command's graceful stop when it registered one
(:func:`graceful_stop`: ``tracker poll`` finishes the revisions in hand, says what it did and what
it left, and exits 130); otherwise, and during start-up (imports, settings, the database), it is a
``KeyboardInterrupt``, which ends the command with one line and exit 130, never a traceback. A
second SIGINT exits at once (130). ``tracker run`` installs its own handlers (SIGTERM too).

Kept free of imports beyond the standard library: this module runs before the CLI is loaded.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130, as shells report a command ended by Ctrl-C

_stops: list[Callable[[], None]] = []  # the running command's graceful stop, innermost last
_signals = 0


def _on_sigint(_signum: int, _frame: FrameType | None) -> None:
    global _signals
    _signals += 1
    if _signals > 1:
        os.write(2, b"interrupted again: exiting now\n")
        os._exit(EXIT_INTERRUPTED)
    if _stops:
        _stops[-1]()
        return
    raise KeyboardInterrupt


@contextmanager
def graceful_stop(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a first Ctrl-C calls ``stop`` (which must return at once) instead of interrupting."""
    _stops.append(stop)
    try:
        yield
    finally:
        _stops.remove(stop)


def interrupted() -> bool:
    """Whether Ctrl-C was pressed in this process."""
    return _signals > 0


def run() -> None:
    """The console script: the CLI, with Ctrl-C handled as the module docstring says."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when the caller ignores it
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        from tracker.surfaces.cli import main

        status = main.main(prog_name="tracker", standalone_mode=False)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except BaseException as exc:  # click's own: usage errors, Abort, Exit (standalone mode, done here)
        sys.exit(_click_exit(exc))
    if isinstance(status, int):  # click's Exit, returned outside standalone mode
        sys.exit(status)


def _click_exit(exc: BaseException) -> int:
    """What click's standalone mode does with its exceptions: a message and a status."""
    import click

    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    if isinstance(exc, click.Abort):
        sys.stderr.write("interrupted\n" if interrupted() else "Aborted!\n")
        return EXIT_INTERRUPTED if interrupted() else 1
    if isinstance(exc, click.ClickException):
        exc.show()
        return exc.exit_code
    raise exc


__all__ = ["EXIT_INTERRUPTED", "graceful_stop", "interrupted", "run"]

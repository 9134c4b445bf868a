"""What rendering a chat template yields, and the port that renders one. Pure: no I/O.

Chat templates are untrusted Jinja; compiling and rendering them happens in a separate process
(``tracker/adapters/template_sandbox.py``). The analysers ask a :class:`TemplateRenderer` handed to
them by the pipeline, and read its :class:`Outcome`. Standard library only: the sandbox's worker,
run as a plain script, imports this module too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class Limits:
    """What one compile or render may use. Defaults suit real chat templates (a few KiB to ~30 KiB)."""

    render_seconds: float = 2.0  # wall time per compile or render
    output_chars: int = 1_000_000  # rendered characters per render
    source_chars: int = 256 * 1024  # template characters; larger ones are not compiled at all
    range_items: int = 1_000_000  # total items of all range() calls in one render
    memory_bytes: int = 1 << 30  # address space of the worker process
    startup_seconds: float = 20.0  # for the worker to start (interpreter + jinja2 import)
    kill_grace_seconds: float = 1.0  # past render_seconds, before the parent kills the worker


@dataclass(frozen=True)
class Outcome:
    """The result of compiling or rendering one template.

    ``status`` is one of ``ok``, ``syntax_error`` (does not compile), ``unsafe``
    (reached for Python internals), ``error`` (raised while rendering, including
    ``raise_exception``), ``limit`` (time, output, range, memory or size of an
    operation) and ``too_large`` (source over the size limit; never parsed).
    ``line`` is the template line the error points at, where known.
    """

    status: str
    output: str | None = None
    message: str | None = None
    line: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        return cls(
            status=str(data["status"]),
            output=data.get("output"),
            message=data.get("message"),
            line=data.get("line"),
        )


class TemplateRenderer(Protocol):
    """Compiles and renders chat templates under :class:`Limits` (the sandbox, in ``tracker/adapters``)."""

    @property
    def limits(self) -> Limits: ...

    def check(self, source: str) -> Outcome:
        """Does ``source`` compile, and does it name Python internals? No rendering."""

    def features(self, source: str) -> dict[str, list[str]] | None:
        """The roles, free variables and message keys ``source`` tests; None when it does not compile."""

    def render(self, source: str, variables: Mapping[str, Any], *, now: datetime | None = None) -> Outcome:
        """Render ``source`` with JSON-able ``variables``; ``strftime_now`` reads a clock fixed at ``now``."""

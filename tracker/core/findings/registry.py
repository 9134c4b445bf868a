"""The analysers, registered by the ``@analyser`` decorator when their module is imported. Pure.

Each analyser module decorates its ``analyse(change, inputs, rules)``::

    @analyser(library=lib.SENTENCE_TRANSFORMERS, order=150)
    def analyse(change, inputs, rules): ...

``order`` is the analyser's place in a revision's run (lowest first): findings come out in that
order before sorting, and the revision's budgets are spent in it, so it is part of what an
analysis means. ``library`` is the library it runs for (see ``tracker.core.findings``), or None
for an analyser that runs on every revision. A library name that is not one of
:data:`tracker.core.findings.libraries.LIBRARIES`, a module registered twice or two analysers at
the same place fail when the module is imported, never silently at analysis time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tracker.core.findings import libraries as lib

F = TypeVar("F", bound=Callable[..., Any])

PACKAGE = "tracker.core.findings"


@dataclass(frozen=True)
class Registered:
    """One analyser: its module's short name, the library it runs for, its place in the run."""

    name: str
    library: str | None
    order: int
    analyse: Callable[..., Any]
    renders: bool = False  # it renders chat templates: the run hands it the revision's TemplateRenderer
    # Independent parts (one GGUF file each...): analyse(..., only=[part]) analyses one, and the pipeline
    # fetches and holds one part's inputs at a time (their parsed headers do not pile up).
    parts: Callable[[Any], Sequence[Any]] | None = None


_REGISTRY: dict[str, Registered] = {}


def analyser(*, library: str | None, order: int, renders: bool = False,
             parts: Callable[[Any], Sequence[Any]] | None = None) -> Callable[[F], F]:
    """Register the decorated ``analyse`` of its module (the function itself is returned unchanged)."""
    if library is not None and library not in lib.LIBRARIES:
        raise ValueError(f"@analyser(library={library!r}): not a library of tracker.core.findings.libraries "
                         f"({', '.join(lib.LIBRARIES)})")

    def register(function: F) -> F:
        module = function.__module__
        if not module.startswith(PACKAGE + "."):
            raise ValueError(f"@analyser on {module}.{function.__name__}: analysers live in {PACKAGE}")
        name = module.removeprefix(PACKAGE + ".")
        if name in _REGISTRY:
            raise ValueError(f"@analyser: {module} registers a second analyser")
        taken = [r.name for r in _REGISTRY.values() if r.order == order]
        if taken:
            raise ValueError(f"@analyser(order={order}) of {module}: {PACKAGE}.{taken[0]} already runs there")
        _REGISTRY[name] = Registered(name, library, order, function, renders, parts)
        return function

    return register


def registered() -> tuple[Registered, ...]:
    """Every registered analyser, in run order."""
    return tuple(sorted(_REGISTRY.values(), key=lambda r: r.order))

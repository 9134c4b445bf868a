"""Compile and render untrusted chat templates without trusting them.

A chat template is Jinja source downloaded from a model repository: code we did
not write, run on every poll. This module runs it the way transformers does
(``ImmutableSandboxedEnvironment``, ``trim_blocks``/``lstrip_blocks``,
``loopcontrols``, the ``{% generation %}`` tag, ``raise_exception``,
``strftime_now``, transformers' ``tojson``, ``dict`` and hardened
``namespace``) so that what we render is what a user of the model gets, but
with limits a model user does not have:

* **Source size**: a template longer than ``Limits.source_chars`` is refused
  before anything parses it (status ``too_large``).
* **Wall time**: every compile and render runs in a separate worker process
  (``python -I this_file.py --worker``). The parent waits on the worker's pipe
  with ``select`` and *kills* the worker when a job overruns its deadline,
  then starts a fresh one for the next job. We chose a process over the
  alternatives because:

  - a thread cannot be stopped, so a looping template would keep a core busy
    (and hold the GIL) for ever;
  - a purely cooperative limit (counting loop iterations, checking a clock in
    attribute lookups) cannot see work done inside one C call -
    ``'x'|center(10**9)``, ``10 ** 10 ** 8``, an empty ``{% for %}`` nested
    three deep over a long string - and Jinja gives no hook on loop iteration.

  Cooperative checks are still layered on top *inside* the worker, because
  they fail fast with a precise message instead of burning the whole time
  limit: a clock check on every attribute lookup, item lookup, call and output
  chunk; a per-render budget of ``range()`` items (so nested ``range`` loops
  stop early; Jinja's own sandbox already refuses a single ``range`` over
  100 000 items); and size checks on ``*`` and ``**`` before they run.
* **Output size**: output is streamed with ``Template.generate`` and the render
  stops once it passes ``Limits.output_chars``.
* **Memory**: the worker lowers its own ``RLIMIT_AS`` (and sets ``RLIMIT_FSIZE``
  to 0: it never needs to write a file), so an allocation bomb ends in a
  ``MemoryError`` reported as a limit, not in the host swapping.
* **Python internals**: Jinja's sandbox already refuses ``__class__``,
  ``__globals__`` and friends, but by default it returns an *undefined* that
  renders as an empty string, so an attack would go unnoticed. Here any access
  to an underscore or internal attribute raises ``InternalsAccessError`` (a
  ``SecurityError``) at once, and before rendering, the parsed template is
  scanned for such attribute names so an attack hidden behind a condition our
  conversations never meet is still seen (status ``unsafe``).

The worker speaks JSON lines on stdin/stdout and imports nothing but the
standard library, jinja2 and ``tracker/core/templates.py`` (standard library only), so it can run
as a plain script in isolated mode. :class:`LeasedSandbox` is the :class:`~tracker.core.templates.TemplateRenderer`
the analysis is handed: one per analyser run, on the process's shared warm worker when it is free.
Rendering is deterministic: ``strftime_now`` reads a clock fixed by the caller,
so an old and a new template rendered a second apart cannot differ by date.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any, Self

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment, is_internal_attribute

if __name__ == "__main__":  # the worker, run as a plain script in isolated mode: the package's root first
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tracker.core.templates import Limits, Outcome

# ----------------------------------------------------------------------------- shared types


class InternalsAccessError(SecurityError):
    """The template reached for an attribute that leads to Python internals."""


class RenderLimitError(TemplateError):
    """The template went past one of the render limits."""


class TemplateRaisedError(TemplateError):
    """The template called ``raise_exception``, as transformers templates do to reject a conversation."""


# ----------------------------------------------------------------------------- the environment

# Attribute names without underscores that still lead to interpreter internals.
_INTERNAL_NAMES = frozenset(
    {
        "func_globals", "func_code", "func_closure", "im_func", "im_self", "im_class",
        "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await",
        "ag_frame", "ag_code", "f_globals", "f_locals", "f_builtins", "f_back", "f_code",
        "tb_frame", "tb_next", "mro",
    }
)  # fmt: skip


def _is_internal_name(name: Any) -> bool:
    return isinstance(name, str) and (name.startswith("__") or name in _INTERNAL_NAMES)


class _Budget:
    """Per-render deadline and counters, checked cooperatively from the sandbox hooks."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic  # injectable, so that a test drives the clock instead of racing it
        self.start(Limits())

    def start(self, limits: Limits) -> None:
        self.limits = limits
        self.deadline = self.monotonic() + limits.render_seconds
        self.range_left = limits.range_items

    def check_time(self) -> None:
        if self.monotonic() > self.deadline:
            raise RenderLimitError(f"render took longer than {self.limits.render_seconds:g} s")

    def take_range(self, n: int) -> None:
        self.range_left -= n
        if self.range_left < 0:
            raise RenderLimitError(
                f"range() calls produced more than {self.limits.range_items} items in one render"
            )


class _TemplateDict:
    """transformers' ``dict`` global: builds dicts but exposes nothing of the type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """transformers' ``namespace``: refuses underscore attribute names, the route of known namespace abuse."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        # Same signature trick as Jinja's Namespace, so that namespace(self=...) still works.
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise InternalsAccessError(f"namespace attribute {name!r} is unsafe (underscore-prefixed)")


class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` as transformers defines it; here it only renders its body.

    transformers uses the tag to mark assistant tokens; without it, templates
    that use it would not even compile.
    """

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:  # fmt: skip
    """transformers' ``tojson``: plain ``json.dumps`` without Jinja's HTML escaping."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: Any) -> None:
    raise TemplateRaisedError(str(message))


class ChatTemplateSandbox(ImmutableSandboxedEnvironment):
    """transformers' chat-template environment plus the cooperative limits of this module."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(
        self, now: datetime | None = None, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(
            trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
        )
        self.budget = _Budget(monotonic)
        self.now = now or datetime(2024, 7, 23, 12, 0, 0)
        self.filters["tojson"] = _tojson
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = self._strftime_now
        self.globals["dict"] = _TemplateDict()
        self.globals["namespace"] = _TemplateNamespace
        self.globals["range"] = self._range

    # -- globals that need the per-render state

    def _strftime_now(self, fmt: str) -> str:
        return self.now.strftime(str(fmt))

    def _range(self, *args: int) -> range:
        rng = range(*args)
        if len(rng) > MAX_RANGE:
            raise RenderLimitError(f"range of {len(rng)} items; the sandbox allows at most {MAX_RANGE}")
        self.budget.take_range(len(rng))
        self.budget.check_time()
        return rng

    # -- hooks Jinja calls for every attribute, item, call and intercepted operator

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        if _is_internal_name(attribute) or attribute.startswith("_") or is_internal_attribute(obj, attribute):
            raise InternalsAccessError(
                f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
            )
        # Mutating methods (list.append in the immutable sandbox): transformers fails on the call.
        return super().unsafe_undefined(obj, attribute)

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget.check_time()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget.check_time()
        return super().getitem(obj, argument)

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.budget.check_time()
        return super().call(context, obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """Refuse ``*`` and ``**`` whose result would be huge, before computing it."""
        self.budget.check_time()
        limit = self.budget.limits.output_chars
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                sized = isinstance(seq, (str, list, tuple)) and isinstance(n, int) and not isinstance(n, bool)
                if sized and len(seq) * n > limit:
                    raise RenderLimitError(f"'*' would build a sequence of {len(seq) * n} items")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            bits = max(abs(left).bit_length(), 1) * right
            if abs(left) > 1 and bits > 64 * 1024:
                raise RenderLimitError(f"'**' would build a number of about {bits} bits")
        return super().call_binop(context, operator, left, right)


def scan_for_internals(ast: nodes.Template) -> tuple[list[str], int] | None:
    """The attribute names leading to Python internals that the template names, and the first one's line.

    Catches ``x.__class__``, ``x['__globals__']``, ``x|attr('__init__')``,
    ``{% set ns.__x = .. %}`` and ``namespace(__x=..)`` even where no rendering
    reaches them (an attack hidden behind a condition our conversations never
    meet). Names built at run time are left to the render-time check.
    """
    found: dict[str, int] = {}
    for node in ast.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.NSRef, nodes.Keyword)):
        name: Any = None
        if isinstance(node, (nodes.Getattr, nodes.NSRef)):
            name = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            name = node.arg.value
        elif isinstance(node, nodes.Filter) and node.name == "attr" and node.args:
            if isinstance(node.args[0], nodes.Const):
                name = node.args[0].value
        elif isinstance(node, nodes.Keyword):
            name = node.key
        if _is_internal_name(name):
            found[name] = min(found.get(name, node.lineno), node.lineno)
    if not found:
        return None
    return sorted(found), min(found.values())


# Names a chat template may read that transformers (or our renderer) always supplies.
_SUPPLIED = frozenset({
    "messages", "add_generation_prompt", "tools", "documents", "bos_token", "eos_token", "unk_token",
    "pad_token", "sep_token", "cls_token", "mask_token", "raise_exception", "strftime_now", "range",
    "namespace", "dict", "loop", "lipsum", "cycler", "joiner", "true", "false", "none", "True", "False",
    "None", "continue_final_message",
})
_ROLE_WORDS = ("role", "author", "speaker")
MAX_FEATURES = 16


def _mentions_role(node: nodes.Node) -> bool:
    for sub in (node, *node.find_all((nodes.Getattr, nodes.Getitem, nodes.Name))):
        if isinstance(sub, nodes.Getattr) and sub.attr in _ROLE_WORDS:
            return True
        if isinstance(sub, nodes.Getitem) and isinstance(sub.arg, nodes.Const) and sub.arg.value in _ROLE_WORDS:
            return True
        if isinstance(sub, nodes.Name) and any(w in sub.name.lower() for w in _ROLE_WORDS):
            return True
    return False


def _strings(node: nodes.Node) -> list[str]:
    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (nodes.List, nodes.Tuple)):
        return [v for item in node.items for v in _strings(item)]
    return []


def template_features(ast: nodes.Template) -> dict[str, list[str]]:
    """What a template tests, so that conversations reaching its branches can be derived.

    ``roles``: role names compared against (``message['role'] == 'developer'``,
    ``message.role in ['tool', 'ipython']``); ``variables``: names it reads that no
    caller supplies (``enable_thinking``, ``date_string``, ``builtin_tools``), and
    ``documents``, which callers supply only sometimes;
    ``keys``: message keys it reads by a constant name (``reasoning_content``).
    Each list is sorted and capped at ``MAX_FEATURES``.
    """
    import jinja2.meta

    roles: set[str] = set()
    for compare in ast.find_all(nodes.Compare):
        operands = [compare.expr, *(op.expr for op in compare.ops)]
        if not any(_mentions_role(o) for o in operands):
            continue
        for o in operands:
            roles.update(v for v in _strings(o) if 0 < len(v) <= 32 and v.isprintable())
    keys: set[str] = set()
    for access in ast.find_all((nodes.Getattr, nodes.Getitem)):
        name: Any = None
        if isinstance(access, nodes.Getattr):
            name = access.attr
        elif isinstance(access, nodes.Getitem) and isinstance(access.arg, nodes.Const):
            name = access.arg.value
        if isinstance(name, str) and name.isidentifier() and not name.startswith("_"):
            keys.add(name)
    # documents is supplied, but only when given: a template that reads it has a branch for it
    variables = {
        v for v in jinja2.meta.find_undeclared_variables(ast)
        if (v not in _SUPPLIED or v == "documents") and not v.startswith("_")
    }
    return {
        "roles": sorted(roles)[:MAX_FEATURES],
        "variables": sorted(variables)[:MAX_FEATURES],
        "keys": sorted(keys)[: MAX_FEATURES * 4],
    }


def _template_line(exc: BaseException) -> int | None:
    """The template line of the innermost frame of ``exc`` that ran template code."""
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == "<template>":
            line = lineno
    return line


def compile_source(env: ChatTemplateSandbox, source: str) -> tuple[Outcome, jinja2.Template | None]:
    """Parse, scan and compile ``source`` in ``env`` (in the worker)."""
    try:
        ast = env.parse(source)
        hit = scan_for_internals(ast)
        if hit is not None:
            names, line = hit
            listed = ", ".join(repr(n) for n in names)
            return Outcome("unsafe", message=f"template names internal attributes: {listed}", line=line), None
        return Outcome("ok"), env.from_string(ast)
    except TemplateSyntaxError as exc:
        return Outcome("syntax_error", message=exc.message or str(exc), line=exc.lineno), None
    except RecursionError:
        return Outcome("error", message="template is nested too deeply to compile"), None
    except MemoryError:
        return Outcome("limit", message="compiling the template ran out of memory"), None
    except Exception as exc:
        return Outcome("syntax_error", message=f"{type(exc).__name__}: {exc}"), None


def render_compiled(
    env: ChatTemplateSandbox, template: jinja2.Template, variables: Mapping[str, Any], limits: Limits
) -> Outcome:
    """Render with the cooperative limits armed (in the worker)."""
    env.budget.start(limits)
    parts: list[str] = []
    size = 0
    try:
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > limits.output_chars:
                raise RenderLimitError(f"output passed {limits.output_chars} characters")
            env.budget.check_time()
            parts.append(chunk)
    except InternalsAccessError as exc:
        return Outcome("unsafe", message=str(exc), line=_template_line(exc))
    except RenderLimitError as exc:
        return Outcome("limit", message=str(exc), line=_template_line(exc))
    except MemoryError as exc:
        parts.clear()
        return Outcome("limit", message="render ran out of memory", line=_template_line(exc))
    except TemplateRaisedError as exc:
        return Outcome("error", message=f"raise_exception: {exc}", line=_template_line(exc))
    except RecursionError as exc:
        return Outcome("error", message="recursion too deep", line=_template_line(exc))
    except Exception as exc:
        return Outcome("error", message=f"{type(exc).__name__}: {exc}", line=_template_line(exc))
    return Outcome("ok", output="".join(parts))


# ----------------------------------------------------------------------------- the worker process


def _limit_resources(memory_bytes: int) -> None:
    try:
        import resource
    except ImportError:  # not on POSIX: the wall-time kill still applies
        return
    for which, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_FSIZE, 0)):
        try:
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, hard))
        except (ValueError, OSError):
            pass


def _worker_main(memory_bytes: int) -> None:
    """Answer one JSON line per request: {"op": "check"|"render", "source", "variables", "limits", "now"}."""
    _limit_resources(memory_bytes)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    env = ChatTemplateSandbox()
    cache: OrderedDict[str, tuple[Outcome, jinja2.Template | None]] = OrderedDict()
    stdout.write(b'{"ready": true}\n')
    stdout.flush()
    for raw in stdin:
        try:
            request = json.loads(raw)
            limits = Limits(**request.get("limits", {}))
            env.now = datetime.fromisoformat(request.get("now") or "2024-07-23T12:00:00")
            source = request["source"]
            key = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
            if key not in cache:
                env.budget.start(limits)
                cache[key] = compile_source(env, source)
                if len(cache) > 32:
                    cache.popitem(last=False)
            compiled, template = cache[key]
            if request["op"] == "features" and template is not None:
                env.budget.start(limits)
                features = template_features(env.parse(source))
                outcome = Outcome("ok", output=json.dumps(features))
            elif request["op"] in ("check", "features") or template is None:
                outcome = compiled
            else:
                outcome = render_compiled(env, template, request.get("variables") or {}, limits)
            reply = outcome.to_json()
        except Exception as exc:
            reply = Outcome("error", message=f"sandbox worker: {type(exc).__name__}: {exc}").to_json()
        stdout.write(json.dumps(reply, ensure_ascii=True).encode("ascii") + b"\n")
        stdout.flush()


# ----------------------------------------------------------------------------- the parent side


class _WorkerGone(Exception):
    pass


class TemplateSandbox:
    """Compile and render templates in a worker process that is killed when it overruns.

    Not thread-safe: one caller at a time. The worker starts on the first
    request, is restarted after a kill, and ends on ``close()`` (or when this
    process exits: it stops at end of input). A template that once ran out of
    time is not run again by this instance (whether the worker's own clock
    stopped it or the parent killed it); its later renders get the same
    ``limit`` outcome at once, so one hostile template costs one time limit,
    not one per conversation, nor one per named template with the same source.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = bytearray()
        self._timed_out: set[str] = set()
        self.started = 0  # how many worker processes this instance started (for tests)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public

    def check(self, source: str, *, limits: Limits | None = None) -> Outcome:
        """Does ``source`` compile, and does it name Python internals? No rendering."""
        return self._run({"op": "check", "source": source}, limits or self.limits)

    def features(self, source: str, *, limits: Limits | None = None) -> dict[str, list[str]] | None:
        """The roles, free variables and message keys ``source`` tests (see :func:`template_features`).

        Parsed in the worker, under the same limits as a render; None when the
        template does not compile or the analysis failed.
        """
        outcome = self._run({"op": "features", "source": source}, limits or self.limits)
        if not outcome.ok or outcome.output is None:
            return None
        data = json.loads(outcome.output)
        return {k: [str(x) for x in data.get(k, [])] for k in ("roles", "variables", "keys")}

    def render(
        self,
        source: str,
        variables: Mapping[str, Any],
        *,
        now: datetime | None = None,
        limits: Limits | None = None,
    ) -> Outcome:
        """Render ``source`` with JSON-able ``variables``; ``strftime_now`` reads a clock fixed at ``now``."""
        request = {
            "op": "render",
            "source": source,
            "variables": dict(variables),
            "now": (now or datetime(2024, 7, 23, 12, 0, 0)).isoformat(),
        }
        return self._run(request, limits or self.limits)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._buf.clear()
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout:
                proc.stdout.close()

    def forget_timeouts(self) -> None:
        """Allow templates that overran before to run again (a new analysis, a fresh chance)."""
        self._timed_out.clear()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    # -- internals

    def _run(self, request: dict[str, Any], limits: Limits) -> Outcome:
        source = request["source"]
        if len(source) > limits.source_chars:
            return Outcome(
                "too_large",
                message=f"template is {len(source)} characters; the limit is {limits.source_chars}",
            )
        key = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
        if key in self._timed_out:
            return Outcome(
                "limit",
                message=f"not run: this template already took longer than {limits.render_seconds:g} s",
            )
        request["limits"] = asdict(limits)
        payload = json.dumps(request, ensure_ascii=True).encode("ascii") + b"\n"
        for attempt in (1, 2):
            self._ensure_started(limits)
            try:
                reply = self._exchange(
                    payload, time.monotonic() + limits.render_seconds + limits.kill_grace_seconds
                )
            except _WorkerGone as exc:
                self._discard()
                if attempt == 2:
                    return Outcome("error", message=f"renderer process died: {exc}")
                continue
            if reply is None:  # overran: kill it; the next request starts a fresh worker
                self._discard()
                self._timed_out.add(key)
                return Outcome(
                    "limit",
                    message=f"render took longer than {limits.render_seconds:g} s; the renderer was killed",
                )
            outcome = Outcome.from_json(reply)
            if outcome.status == "limit" and (outcome.message or "").startswith("render took longer than"):
                # The worker's own clock stopped it: as slow as a kill, so remembered the same way.
                self._timed_out.add(key)
            return outcome
        raise AssertionError("unreachable")

    def _ensure_started(self, limits: Limits) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._discard()
        self._proc = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), "--worker", str(limits.memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self.started += 1
        try:
            ready = self._readline(time.monotonic() + limits.startup_seconds)
        except _WorkerGone as exc:
            self._discard()
            raise RuntimeError(f"template sandbox worker failed to start: {exc}") from None
        if ready is None or json.loads(ready).get("ready") is not True:
            self._discard()
            raise RuntimeError("template sandbox worker did not start in time")

    def _exchange(self, payload: bytes, deadline: float) -> dict[str, Any] | None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(payload)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise _WorkerGone(f"cannot write to it ({exc})") from None
        line = self._readline(deadline)
        if line is None:
            return None
        try:
            answer: dict[str, Any] | None = json.loads(line)
        except ValueError:
            raise _WorkerGone("it sent something that is not JSON") from None
        return answer

    def _readline(self, deadline: float) -> bytes | None:
        """One line from the worker, or None at the deadline; _WorkerGone at end of file."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                code = self._proc.wait()
                raise _WorkerGone(f"exit status {code}")
            self._buf += chunk
        index = self._buf.index(b"\n")
        line = bytes(self._buf[:index])
        del self._buf[: index + 1]
        return line

    def _discard(self) -> None:
        proc, self._proc = self._proc, None
        self._buf.clear()
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass




# ----------------------------------------------------------------------------- the lease

_shared_sandbox: TemplateSandbox | None = None
_shared_lock = threading.Lock()


class LeasedSandbox:
    """A :class:`~tracker.core.templates.TemplateRenderer` for one analysis, a sandbox taken at its first request.

    The process's shared sandbox when it is free (its worker stays warm: sharing saves a process
    start, ~0.3 s, per analysed revision, and workers are stateless between requests so one revision
    cannot affect another), else a private one; custom limits (tests) always get a private one.
    ``close()`` gives it back. Outcomes are kept for the lease's life: an analysis run again over
    more of its inputs (``tracker/pipeline/analysis.py``) renders nothing twice.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self._custom = limits
        self.limits = limits or Limits()
        self._box: TemplateSandbox | None = None
        self._shared = False
        self._done: dict[tuple[str, ...], Any] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sandbox(self) -> TemplateSandbox:
        global _shared_sandbox
        if self._box is not None:
            return self._box
        if self._custom is None and _shared_lock.acquire(blocking=False):
            if _shared_sandbox is None:
                _shared_sandbox = TemplateSandbox()
                atexit.register(_shared_sandbox.close)
            _shared_sandbox.forget_timeouts()
            self._box, self._shared = _shared_sandbox, True
        else:
            self._box = TemplateSandbox(self._custom)
        return self._box

    def _once(self, key: tuple[str, ...], run: Callable[[TemplateSandbox], Any]) -> Any:
        if key not in self._done:
            self._done[key] = run(self._sandbox())
        return self._done[key]

    def check(self, source: str) -> Outcome:
        outcome: Outcome = self._once(("check", source), lambda box: box.check(source))
        return outcome

    def features(self, source: str) -> dict[str, list[str]] | None:
        found: dict[str, list[str]] | None = self._once(("features", source), lambda box: box.features(source))
        return found

    def render(self, source: str, variables: Mapping[str, Any], *, now: datetime | None = None) -> Outcome:
        key = ("render", source, json.dumps(variables, sort_keys=True, default=str), str(now))
        outcome: Outcome = self._once(key, lambda box: box.render(source, variables, now=now))
        return outcome

    def close(self) -> None:
        box, self._box = self._box, None
        if box is None:
            return
        if self._shared:
            self._shared = False
            _shared_lock.release()
        else:
            box.close()


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _worker_main(int(sys.argv[2]) if len(sys.argv) > 2 else Limits().memory_bytes)

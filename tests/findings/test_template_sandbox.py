"""The template sandbox: transformers' semantics, and containment of hostile templates.

Chat templates are untrusted code from the Hub. These tests pin down that the
sandbox renders real templates exactly as transformers would (same environment
flags and helpers) and that every hostile pattern - internals access, loops,
huge output, huge numbers, huge sources - ends quickly as an ``Outcome``.
Limits are shortened so the whole file runs in a few seconds.
"""

from __future__ import annotations

import os

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tracker.adapters.template_sandbox import (
    ChatTemplateSandbox,
    Limits,
    Outcome,
    TemplateSandbox,
    compile_source,
    render_compiled,
)

# Where the render time limit is not what a test checks, it is far out of reach, so that a busy machine
# cannot turn a hook's or a budget's stop into a timeout.
ROOMY = Limits(render_seconds=60.0, kill_grace_seconds=5.0)
# Where it is: short enough to keep the test quick, long enough that a benign render on a loaded machine
# stays inside it; the bombs it stops run for minutes.
TIMED = Limits(render_seconds=3.0, kill_grace_seconds=1.0)


@pytest.fixture(scope="module")
def sandbox():
    with TemplateSandbox(ROOMY) as box:
        yield box


def render(box: TemplateSandbox, source: str, **variables) -> Outcome:
    return box.render(source, variables)


# ----------------------------------------------------------------------------- transformers' semantics


def test_environment_is_transformers_immutable_sandbox_with_trimmed_blocks():
    env = ChatTemplateSandbox()
    assert isinstance(env, ImmutableSandboxedEnvironment)
    assert env.trim_blocks and env.lstrip_blocks
    assert env.from_string("{% if true %}\n  x\n  {% endif %}\nend").render() == "  x\nend"


def test_transformers_helpers_behave_as_in_transformers(sandbox):
    source = (
        "{{ {'a': '<b>é'}|tojson }}|{{ [1, 2]|tojson(indent=1) }}|{{ strftime_now('%d %b %Y') }}|"
        "{% generation %}gen{% endgeneration %}|"
        "{% for i in range(5) %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}|"
        "{% set ns = namespace(n=1) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}|{{ dict(a=1) }}|{{ bos_token }}"
    )
    outcome = render(sandbox, source, bos_token="<s>")
    assert outcome == Outcome("ok", output='{"a": "<b>é"}|[\n 1,\n 2\n]|23 Jul 2024|gen|01|2|{\'a\': 1}|<s>')


def test_clock_is_what_the_caller_fixes(sandbox):
    from datetime import datetime

    outcome = sandbox.render("{{ strftime_now('%Y-%m-%d') }}", {}, now=datetime(2031, 1, 2))
    assert outcome.output == "2031-01-02"


def test_raise_exception_is_reported_with_its_message_and_line(sandbox):
    source = (
        "{% for m in messages %}\n{% if m.role == 'system' %}\n"
        "{{ raise_exception('System role not supported') }}\n{% endif %}{% endfor %}"
    )
    outcome = render(sandbox, source, messages=[{"role": "system", "content": "x"}])
    assert outcome == Outcome("error", message="raise_exception: System role not supported", line=3)


def test_syntax_error_has_jinja_message_and_line(sandbox):
    assert sandbox.check("line one\n{{ content }\n") == Outcome(
        "syntax_error", message="unexpected '}'", line=2
    )
    assert sandbox.check("{% if x %}never closed") == Outcome(
        "syntax_error",
        message="Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or "
        "'endif'. The innermost block that needs to be closed is 'if'.",
        line=1,
    )


# ----------------------------------------------------------------------------- Python internals

INTERNALS = [
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "'__class__', '__mro__', '__subclasses__'"),
    ("{{ cycler.__init__.__globals__.os }}", "'__globals__', '__init__'"),
    ("{{ self.__init__.__globals__ }}", "'__globals__', '__init__'"),
    ("{{ joiner.__init__.__globals__['__builtins__'] }}", "'__builtins__', '__globals__', '__init__'"),
    ("{{ ''['__class__'] }}", "'__class__'"),
    ("{{ ''|attr('__class__') }}", "'__class__'"),
    ("{% set ns = namespace() %}{% set ns.__class__ = 1 %}", "'__class__'"),
    ("{{ namespace(__init__=1) }}", "'__init__'"),
    ("{% if messages|length > 1000 %}{{ lipsum.__globals__ }}{% endif %}", "'__globals__'"),
]


@pytest.mark.parametrize(("source", "names"), INTERNALS)
def test_internals_are_refused_before_rendering(sandbox, source, names):
    """Named internals are seen in the parsed template, even behind a condition no conversation meets."""
    assert sandbox.check(source) == Outcome(
        "unsafe", message=f"template names internal attributes: {names}", line=1
    )
    assert render(sandbox, source, messages=[]).status == "unsafe"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ ''.__class__.__mro__ }}", "access to attribute '__class__' of 'str' object is unsafe"),
        ("{{ cycler.__init__.__globals__ }}", "access to attribute '__init__' of 'type' object is unsafe"),
        ("{{ self.__init__ }}", "access to attribute '__init__' of 'TemplateReference' object is unsafe"),
        ("{{ ''['__class__'] }}", "access to attribute '__class__' of 'str' object is unsafe"),
        ("{{ '{0.__class__}'.format('') }}", "access to attribute '__class__' of 'str' object is unsafe"),
        ("{{ namespace(_secret=1) }}", "namespace attribute '_secret' is unsafe (underscore-prefixed)"),
    ],
)
def test_internals_raise_at_render_time_too(source, message):
    """Without the static scan, the render hooks still raise instead of rendering an empty undefined."""
    env = ChatTemplateSandbox()
    outcome = render_compiled(env, env.from_string(source), {}, ROOMY)
    assert outcome == Outcome("unsafe", message=message, line=1)


def test_the_render_time_limit_reads_the_injected_clock():
    """The worker's own deadline, driven by a clock that moves 1 s per reading rather than raced by the CPU."""
    ticks = iter(range(10**6))
    env = ChatTemplateSandbox(monotonic=lambda: float(next(ticks)))
    source = "{% for i in range(1000) %}{{ i }}{% endfor %}"
    outcome = render_compiled(env, env.from_string(source), {}, ROOMY)
    assert (outcome.status, outcome.message) == ("limit", "render took longer than 60 s")
    frozen = ChatTemplateSandbox(monotonic=lambda: 0.0)
    assert render_compiled(frozen, frozen.from_string(source), {}, ROOMY).output == "".join(map(str, range(1000)))


def test_internals_named_at_run_time_are_caught_while_rendering(sandbox):
    source = "{{ messages[0]|attr('__cla' ~ 'ss__') }}"
    assert sandbox.check(source) == Outcome("ok")
    assert render(sandbox, source, messages=["x"]) == Outcome(
        "unsafe", message="access to attribute '__class__' of 'str' object is unsafe", line=1
    )


def test_mutating_a_list_is_a_render_error_not_an_attack(sandbox):
    """transformers' immutable sandbox also fails here; a template bug, not a reach for internals."""
    outcome = render(sandbox, "{% set x = [] %}{{ x.append(1) }}")
    assert outcome == Outcome(
        "error", message="SecurityError: access to attribute 'append' of 'list' object is unsafe.", line=1
    )


# ----------------------------------------------------------------------------- resource limits


def test_huge_range_is_refused_at_once(sandbox):
    render(sandbox, "{{ 1 }}")
    worker = sandbox.pid
    outcome = render(sandbox, "{% for i in range(10**9) %}{{ i }}{% endfor %}")
    assert outcome == Outcome(
        "limit", message="range of 1000000000 items; the sandbox allows at most 100000", line=1
    )
    assert sandbox.pid == worker  # refused by range() itself: the worker was not killed on a timeout


def test_nested_range_bomb_stops_on_the_range_budget(sandbox):
    source = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    render(sandbox, "{{ 1 }}")
    worker = sandbox.pid
    outcome = render(sandbox, source)
    assert outcome == Outcome(
        "limit", message="range() calls produced more than 1000000 items in one render", line=1
    )
    assert sandbox.pid == worker  # the budget stopped it, not the render timeout's kill


def test_loop_bomb_without_hooks_is_killed_and_the_next_render_gets_a_fresh_worker():
    """Iterating a string runs no sandbox hook, so only the parent's kill can stop it."""
    bomb = (
        "{% set s = 'x' * 1000 %}"
        "{% for a in s %}{% for b in s %}{% for c in s %}{% endfor %}{% endfor %}{% endfor %}"
    )
    with TemplateSandbox(TIMED) as box:
        assert render(box, "{{ 1 }}").output == "1"
        first_pid = box.pid
        outcome = render(box, bomb)
        assert outcome == Outcome("limit", message="render took longer than 3 s; the renderer was killed")
        with pytest.raises(ProcessLookupError):
            os.kill(first_pid, 0)

        assert render(box, bomb) == Outcome(
            "limit", message="not run: this template already took longer than 3 s"
        )
        assert box.started == 1  # not run: no worker started for it

        assert render(box, "{{ 'still works' }}").output == "still works"
        assert box.started == 2 and box.pid != first_pid


def test_output_is_capped_while_streaming(sandbox):
    outcome = render(sandbox, "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}")
    assert outcome == Outcome("limit", message="output passed 1000000 characters")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ 'x' * 10**9 }}", "'*' would build a sequence of 1000000000 items"),
        ("{{ (messages * 100000000)|length }}", "'*' would build a sequence of 100000000 items"),
        ("{{ 10 ** 100000000 }}", "'**' would build a number of about 400000000 bits"),
    ],
)
def test_operators_are_size_checked_before_they_run(sandbox, source, message):
    assert render(sandbox, source, messages=[1]) == Outcome("limit", message=message, line=1)


def test_memory_bomb_ends_in_a_limit_not_in_swapping(sandbox):
    assert render(sandbox, "{{ 'x'|center(3000000000) }}") == Outcome(
        "limit", message="render ran out of memory", line=1
    )


def test_huge_template_is_refused_without_parsing_or_starting_a_worker():
    source = "{{ 'x' }}" * (5 * 1024 * 1024 // 9 + 1)
    with TemplateSandbox(ROOMY) as box:
        assert box.check(source) == Outcome(
            "too_large", message=f"template is {len(source)} characters; the limit is 262144"
        )
        assert box.render(source, {}).status == "too_large"
        assert box.started == 0


def test_deep_nesting_does_not_crash_the_worker(sandbox):
    outcome = sandbox.check("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}")
    assert outcome.status in ("syntax_error", "error")
    assert render(sandbox, "{{ 2 }}").output == "2"


def test_close_ends_the_worker():
    box = TemplateSandbox(ROOMY)
    assert render(box, "{{ 1 }}").ok
    pid = box.pid
    box.close()
    assert box.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_compile_source_in_process_reports_without_raising():
    env = ChatTemplateSandbox()
    outcome, template = compile_source(env, "{% for %}")
    assert template is None
    assert outcome == Outcome(
        "syntax_error", message="Expected an expression, got 'end of statement block'", line=1
    )

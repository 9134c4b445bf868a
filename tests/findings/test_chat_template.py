"""Chat template findings, on the real Llama-3 incident and on hostile templates.

The Llama-3-8B-Instruct fix (the generation prompt was appended whether or not
``add_generation_prompt`` asked for it) is the reference incident: the exact
findings, which conversations changed and the diff excerpts are asserted, so a
regression in template discovery, rendering or wording shows up here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.findings.sources import analyse_revision, make_change, rendered
from tests.shared import INCIDENTS
from tracker.core.findings import chat_template
from tracker.core.findings.chat_template import analyse, canonical_conversations
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity
from tracker.core.templates import Limits

INCIDENT = INCIDENTS / "02-llama3-8b-instruct-chat-template-genprompt"
if not INCIDENT.is_dir():  # pragma: no cover - the shared real data lives outside the repository
    pytest.skip(f"real incident files not found at {INCIDENT}", allow_module_level=True)

BEFORE = (INCIDENT / "before" / "chat_template.jinja").read_text("utf-8")
AFTER = (INCIDENT / "after" / "chat_template.jinja").read_text("utf-8")
BOS, EOT, EOS = "<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>"

# long enough for the benign renders on a loaded machine; the looping template runs for minutes
TIMED = Limits(render_seconds=3.0, kill_grace_seconds=1.0)
RULES = SeverityRules.default()


def config(**fields) -> bytes:
    """A tokenizer_config.json with Llama-3's special tokens unless overridden."""
    return json.dumps({"bos_token": BOS, "eos_token": EOS, **fields}).encode()


def side(template: str, **fields) -> dict[str, bytes]:
    """A revision holding ``template`` in chat_template.jinja next to a Llama-3 tokenizer_config.json."""
    return {"chat_template.jinja": template.encode(), "tokenizer_config.json": config(**fields)}


def run(old, new, **kw):
    change, sources = make_change(old, new)
    return rendered(analyse, change, sources, RULES, **kw)


def codes(findings):
    return [(f.code, f.severity) for f in findings]


# ----------------------------------------------------------------------------- the real incident

LLAMA_SUMMARY = (
    "rendered prompt changed for 4 of 8 conversations (exactly those without the generation prompt); "
    "one user turn, no generation prompt: "
    "removes '<|start_header_id|>assistant<|end_header_id|>\\n\\n' at the end"
)
LLAMA_TEXT_DIFF = """\
--- old/chat_template.jinja
+++ new/chat_template.jinja
@@ -9,3 +9,5 @@
 {% endfor %}
+{% if add_generation_prompt %}
 {{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n
 ' }}
+{% endif %}"""
LLAMA_RENDERED_DIFF = """\
--- old: one_turn
+++ new: one_turn
@@ -1,4 +1,3 @@
 <|begin_of_text|><|start_header_id|>user<|end_header_id|>\\n
 \\n
-Hello, who are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\\n
-\\n
+Hello, who are you?<|eot_id|>"""


def test_llama3_generation_prompt_fix_in_chat_template_jinja():
    old = {"chat_template.jinja": BEFORE.encode(), "tokenizer_config.json": config()}
    new = {"chat_template.jinja": AFTER.encode(), "tokenizer_config.json": config()}
    [finding] = run(old, new)
    assert finding.code == "chat_template.rendered_prompt_changed"
    assert finding.severity is Severity.HIGH
    assert finding.category == "chat_template"
    assert finding.path == "chat_template.jinja"
    assert finding.summary == LLAMA_SUMMARY
    assert finding.before == f"{BOS}<|start_header_id|>user<|end_header_id|>\n\nHello, who are you?{EOT}" + (
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert finding.after == f"{BOS}<|start_header_id|>user<|end_header_id|>\n\nHello, who are you?{EOT}"
    assert finding.evidence["changed"] == ["one_turn", "system_user", "multi_turn", "tool_call"]
    assert finding.evidence["unchanged"] == [
        "one_turn+gen",
        "system_user+gen",
        "multi_turn+gen",
        "tool_call+gen",
    ]
    assert finding.evidence["cause"] == "template text"
    assert finding.evidence["text_diff"] == LLAMA_TEXT_DIFF
    assert finding.evidence["rendered_diff"] == LLAMA_RENDERED_DIFF


def test_llama3_fix_in_tokenizer_config_with_dict_tokens_and_an_eos_change():
    """The Hub layout of the time: templates inside tokenizer_config.json, tokens as AddedToken dicts."""
    old = {"tokenizer_config.json": config(chat_template=BEFORE, bos_token={"content": BOS, "lstrip": False})}
    new = {"tokenizer_config.json": config(chat_template=AFTER, bos_token={"content": BOS}, eos_token=EOT)}
    [finding] = run(old, new)
    assert codes([finding]) == [("chat_template.rendered_prompt_changed", Severity.HIGH)]
    assert finding.path == "tokenizer_config.json"
    assert finding.summary == LLAMA_SUMMARY
    assert finding.before.startswith(BOS)
    assert finding.evidence["cause"] == "template text and special tokens"
    assert finding.evidence["tokens_changed"] == {"eos_token": [EOS, EOT]}
    assert finding.evidence["text_diff"] == LLAMA_TEXT_DIFF.replace(
        "chat_template.jinja", "tokenizer_config.json"
    )


def test_a_template_that_lost_a_brace_does_not_compile():
    broken = AFTER.replace("{{ content }}", "{{ content }", 1)
    assert broken.count("}") == AFTER.count("}") - 1
    old = {"chat_template.jinja": AFTER.encode(), "tokenizer_config.json": config()}
    new = {"chat_template.jinja": broken.encode(), "tokenizer_config.json": config()}
    [finding] = run(old, new)
    assert codes([finding]) == [("chat_template.compile_failed", Severity.HIGH)]
    assert finding.summary == "chat template in chat_template.jinja does not compile (line 3): unexpected '}'"
    assert finding.evidence["error"] == "unexpected '}'"
    assert finding.evidence["line"] == 3
    assert "{{ content }{% endfor %}" in finding.evidence["source_line"]
    assert "-{{ content }}\n+{{ content }\n" in finding.evidence["text_diff"]


# ----------------------------------------------------------------------------- where templates live


def test_chat_template_jinja_overrides_tokenizer_config():
    """A change to the shadowed tokenizer_config.json template changes nothing transformers loads."""
    old = {"chat_template.jinja": AFTER.encode(), "tokenizer_config.json": config(chat_template=BEFORE)}
    new = {"chat_template.jinja": AFTER.encode(), "tokenizer_config.json": config(chat_template="{{ 'x' }}")}
    assert run(old, new) == []


def test_template_moved_out_of_tokenizer_config():
    old = {"tokenizer_config.json": config(chat_template=AFTER)}
    new = {"tokenizer_config.json": config(), "chat_template.jinja": AFTER.encode()}
    [finding] = run(old, new)
    assert codes([finding]) == [("chat_template.moved", Severity.INFO)]
    assert (
        finding.summary
        == "chat template moved from tokenizer_config.json to chat_template.jinja, text unchanged"
    )


def test_named_templates_added_and_removed_per_name():
    tool_use = "{% for m in messages %}{{ m.role }}{% endfor %}{{ tools|tojson }}"
    rag = "{% for m in messages %}[{{ m.role }}]{% endfor %}"
    old = {
        "tokenizer_config.json": config(
            chat_template=[{"name": "default", "template": AFTER}, {"name": "tool_use", "template": tool_use}]
        )
    }
    new = {
        "tokenizer_config.json": config(),
        "chat_template.jinja": AFTER.encode(),
        "additional_chat_templates/rag.jinja": rag.encode(),
        "additional_chat_templates/nested/ignored.jinja": b"{{ x }",
    }
    findings = run(old, new)
    assert [(f.code, f.severity, f.path, f.summary) for f in findings] == [
        (
            "chat_template.moved",
            Severity.INFO,
            "chat_template.jinja",
            "chat template moved from tokenizer_config.json to chat_template.jinja, text unchanged",
        ),
        (
            "chat_template.added",
            Severity.HIGH,
            "additional_chat_templates/rag.jinja",
            "chat template 'rag' added in additional_chat_templates/rag.jinja",
        ),
        (
            "chat_template.removed",
            Severity.HIGH,
            "tokenizer_config.json",
            "chat template 'tool_use' removed (was in tokenizer_config.json)",
        ),
    ]


def test_legacy_chat_template_json():
    old = {
        "chat_template.json": json.dumps({"chat_template": BEFORE}).encode(),
        "tokenizer_config.json": config(),
    }
    new = {
        "chat_template.json": json.dumps({"chat_template": AFTER}).encode(),
        "tokenizer_config.json": config(),
    }
    [finding] = run(old, new)
    assert codes([finding]) == [("chat_template.rendered_prompt_changed", Severity.HIGH)]
    assert finding.path == "chat_template.json"
    assert finding.summary == LLAMA_SUMMARY


def test_default_template_removed():
    [finding] = run(
        {"tokenizer_config.json": config(chat_template=AFTER)}, {"tokenizer_config.json": config()}
    )
    assert codes([finding]) == [("chat_template.removed", Severity.HIGH)]
    assert finding.summary == "chat template removed (was in tokenizer_config.json)"


# ----------------------------------------------------------------------------- kinds of change


def test_text_changed_but_every_render_is_the_same():
    commented = "{# Llama 3 chat format #}\n" + AFTER
    [finding] = run(side(AFTER), side(commented))
    assert codes([finding]) == [("chat_template.text_changed_render_same", Severity.LOW)]
    assert (
        finding.summary
        == "chat template text changed (+1 −0 pieces) but renders identically on all 8 conversations"
    )
    assert finding.evidence["text_diff"].splitlines()[2:5] == [
        "@@ -1 +1,2 @@",
        "+{# Llama 3 chat format #}\\n",
        " {% set loop_messages = messages %}",
    ]


def test_special_token_change_alone_changes_the_prompt():
    old = {"chat_template.jinja": AFTER.encode(), "tokenizer_config.json": config()}
    new = {"chat_template.jinja": AFTER.encode(), "tokenizer_config.json": config(bos_token="<s>")}
    [finding] = run(old, new)
    assert codes([finding]) == [("chat_template.rendered_prompt_changed", Severity.HIGH)]
    assert finding.summary == (
        "rendered prompt changed for 8 of 8 conversations; one user turn, no generation prompt: "
        "replaces '<|begin_of_text|>' with '<s>' at the start"
    )
    assert finding.evidence["cause"] == "special tokens"
    assert "text_diff" not in finding.evidence


def test_new_template_refusing_the_system_role_fails_where_the_old_rendered():
    strict = (
        "{% if messages[0]['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}" + AFTER
    )
    findings = run(side(AFTER), side(strict))
    assert codes(findings) == [("chat_template.render_failed", Severity.HIGH)]
    assert findings[0].summary == (
        "chat template now fails on 2 of 8 conversations that rendered before; "
        "system + user, no generation prompt: raise_exception: System role not supported"
    )
    assert findings[0].evidence["failed"] == ["system_user", "system_user+gen"]
    assert findings[0].evidence["line"] == 1


def test_fixing_a_failing_template_is_reported_as_recovered():
    strict = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system') }}{% endif %}" + AFTER
    [finding] = run(side(strict), side(AFTER))
    assert codes([finding]) == [("chat_template.render_recovered", Severity.LOW)]
    assert finding.evidence["recovered"] == ["system_user", "system_user+gen"]


def test_named_template_prompt_change_names_the_template():
    old = {**side(AFTER), "additional_chat_templates/tool_use.jinja": BEFORE.encode()}
    new = {**side(AFTER), "additional_chat_templates/tool_use.jinja": AFTER.encode()}
    [finding] = run(old, new)
    assert finding.path == "additional_chat_templates/tool_use.jinja"
    assert finding.summary.startswith(
        "chat template 'tool_use': rendered prompt changed for 4 of 8 conversations"
    )


# ----------------------------------------------------------------------------- hostile templates


@pytest.mark.parametrize(
    "hostile",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
        "{{ self.__init__.__globals__ }}",
        "{% set ns = namespace() %}{% set ns.__class__ = 1 %}",
    ],
)
def test_template_reaching_for_internals_is_critical(hostile):
    [finding] = run(side(AFTER), side(AFTER + hostile))
    assert codes([finding]) == [("chat_template.unsafe", Severity.CRITICAL)]
    assert finding.summary.startswith(
        "chat template in chat_template.jinja reaches for Python internals (line 5): "
    )


def test_internals_named_at_run_time_are_caught_while_rendering():
    hostile = AFTER + "{{ messages[0]|attr('__cla' ~ 'ss__') }}"
    [finding] = run(side(AFTER), side(hostile))
    assert codes([finding]) == [("chat_template.unsafe", Severity.CRITICAL)]
    assert finding.evidence["error"] == "access to attribute '__class__' of 'dict' object is unsafe"


def test_looping_template_is_contained_and_costs_one_time_limit():
    bomb = (
        "{% set s = 'x' * 1000 %}"
        "{% for a in s %}{% for b in s %}{% for c in s %}{% endfor %}{% endfor %}{% endfor %}"
    )
    [finding] = run(side(AFTER), side(bomb + AFTER), limits=TIMED)
    assert codes([finding]) == [("chat_template.render_limit_exceeded", Severity.HIGH)]
    assert finding.summary == (
        "chat template exceeds the render limits on 8 of 8 conversations "
        "(one user turn, no generation prompt: render took longer than 3 s; the renderer was killed)"
    )


def test_range_bomb_and_huge_output_are_render_limits():
    for hostile, message in [
        (
            "{% for i in range(10**9) %}{% endfor %}",
            "range of 1000000000 items; the sandbox allows at most 100000",
        ),
        ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "output passed 1000000 characters"),
    ]:
        [finding] = run(side(AFTER), side(AFTER + hostile))
        assert codes([finding]) == [("chat_template.render_limit_exceeded", Severity.HIGH)]
        assert finding.evidence["error"] == message
        assert len(finding.evidence["conversations"]) == 8


def test_five_megabyte_template_is_not_compiled():
    huge = AFTER + "{# " + "x" * (5 * 1024 * 1024) + " #}"
    [finding] = run(side(AFTER), side(huge))
    assert codes([finding]) == [("chat_template.too_large", Severity.MODERATE)]
    assert finding.summary == (
        f"chat template in chat_template.jinja is too large to check: "
        f"template is {len(huge)} characters; the limit is 262144"
    )


def test_invalid_utf8_template_file_is_unreadable():
    findings = run(side(AFTER), {"chat_template.jinja": b"{{ bos_token }}\xff"})
    assert codes(findings) == [("chat_template.unreadable", Severity.HIGH)]
    assert findings[0].summary == (
        "chat_template.jinja is unreadable: not valid UTF-8 (invalid start byte at byte 15); "
        "its chat template cannot be loaded"
    )


# ----------------------------------------------------------------------------- baseline and no-op revisions


def test_baseline_reports_only_what_is_wrong_with_the_template():
    assert run(None, side(AFTER)) == []
    [finding] = run(None, {"tokenizer_config.json": config(chat_template="{{ self.__init__ }}")})
    assert codes([finding]) == [("chat_template.unsafe", Severity.CRITICAL)]


def test_revision_without_template_changes_reads_nothing():
    files = {
        "chat_template.jinja": AFTER.encode(),
        "tokenizer_config.json": config(),
        "model.safetensors": b"1",
    }
    change, sources = make_change(files, {**files, "model.safetensors": b"2"})
    assert rendered(analyse, change, sources, RULES) == []
    assert sources.reads == []


def test_registered_with_the_findings_registry():
    change, sources = make_change(side(BEFORE), side(AFTER))
    found = [f for f in analyse_revision(change, sources) if f.category == "chat_template"]
    assert [f.code for f in found] == ["chat_template.rendered_prompt_changed"]


def test_every_code_has_a_documented_severity():
    source = Path(chat_template.__file__).read_text("utf-8")
    used = set(re.findall(r'rules\.finding\(\s*"([^"]+)"', source))
    assert used == {code for code in RULES.table if code.startswith("chat_template.")}


def test_canonical_conversations_cover_the_brief():
    assert [c.id for c in canonical_conversations()] == [
        "one_turn", "one_turn+gen", "system_user", "system_user+gen",
        "multi_turn", "multi_turn+gen", "tool_call", "tool_call+gen",
    ]  # fmt: skip
    assert all(c.tools is not None for c in canonical_conversations() if c.id.startswith("tool_call"))

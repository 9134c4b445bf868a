"""Chat templates rendered on every branch they test, and slow templates paying their time limit once."""

from __future__ import annotations

import json

from tests.findings.sources import make_change, rendered
from tracker.adapters.template_sandbox import TemplateSandbox
from tracker.core.findings.chat_template import analyse
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity
from tracker.core.templates import Limits, Outcome

RULES = SeverityRules.default()

# The shape of OpenAI-harmony-style templates: a developer role with its own header.
DEVELOPER_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'developer' %}<|start|>developer<|message|># Instructions\n\n{{ message['content'] }}<|end|>"
    "{% elif message['role'] == 'system' %}<|start|>system<|message|>{{ message['content'] }}<|end|>"
    "{% else %}<|start|>{{ message['role'] }}<|message|>{{ message['content'] }}<|end|>{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}"
)


def run(old: str, new: str, **kw):
    change, sources = make_change({"chat_template.jinja": old.encode()}, {"chat_template.jinja": new.encode()})
    return rendered(analyse, change, sources, RULES, **kw)


def test_a_change_only_inside_the_developer_branch_is_a_rendered_prompt_change():
    fixed = DEVELOPER_TEMPLATE.replace("# Instructions\n\n", "# Instructions\n")
    [finding] = run(DEVELOPER_TEMPLATE, fixed)
    assert (finding.code, finding.severity) == ("chat_template.rendered_prompt_changed", Severity.HIGH)
    assert finding.summary == (
        "rendered prompt changed for 2 of 10 conversations; a developer message, no generation prompt: "
        "removes '\\n' after 'oper<|message|># Instructions\\n'"
    )
    assert finding.evidence["changed"] == ["role:developer", "role:developer+gen"]
    assert finding.evidence["branches"] == {
        "role:developer": {
            "title": "a developer message, no generation prompt",
            "change": "removes '\\n' after 'oper<|message|># Instructions\\n'",
            "rendered_diff": "--- old: role:developer\n+++ new: role:developer\n@@ -1,3 +1,2 @@\n"
                             " <|start|>developer<|message|># Instructions\\n\n-\\n\n"
                             " Answer in one word.<|end|><|start|>user<|message|>What is the capital of France?<|end|>",
        }
    }


def test_tool_result_roles_reasoning_keys_documents_and_free_variables_are_reached():
    template = (
        "{% if documents %}<docs>{% for d in documents %}{{ d.title }}: {{ d.text }}{% endfor %}</docs>{% endif %}"
        "{% for m in messages %}"
        "{% if m.role == 'ipython' %}<|ipython|>{{ m.content }}"
        "{% elif m.role == 'assistant' and m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{{ m.content }}"
        "{% else %}<|{{ m.role }}|>{{ m.content }}{% endif %}{% endfor %}"
        "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}"
        "Today: {{ date_string }}"
    )
    changes = {
        "<|ipython|>": "<|python_tag|>",
        "<think>{{ m.reasoning_content }}</think>": "<think>\n{{ m.reasoning_content }}\n</think>",
        "<docs>": "<documents>",
        "<think></think>{% endif %}": "<think>\n\n</think>{% endif %}",
        "Today: {{ date_string }}": "Today is {{ date_string }}",
    }
    found = {}
    for old, new in changes.items():
        [finding] = run(template, template.replace(old, new))
        assert finding.code == "chat_template.rendered_prompt_changed"
        found[old] = [c for c in finding.evidence["changed"] if not c.endswith("+gen")]
    assert found == {
        "<|ipython|>": ["role:ipython"],
        "<think>{{ m.reasoning_content }}</think>": ["key:reasoning_content"],
        "<docs>": ["documents"],
        "<think></think>{% endif %}": ["var:enable_thinking=false"],
        "Today: {{ date_string }}": [
            "one_turn", "system_user", "multi_turn", "tool_call", "role:ipython", "key:reasoning_content",
            "documents", "var:date_string", "var:enable_thinking=true", "var:enable_thinking=false",
        ],
    }


def test_a_template_with_no_extra_branches_renders_only_the_canonical_conversations():
    plain = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    [finding] = run(plain, plain.replace("<|", "<"))
    assert finding.summary.startswith("rendered prompt changed for 8 of 8 conversations")


SLOW = (
    "{% for i in range(90000) %}{% for j in range(10) %}{% if messages[0]['content'] == 'x' %}x{% endif %}"
    "{% endfor %}{% endfor %}{{ messages[0]['content'] }}"
)
COOPERATIVE = Limits(render_seconds=0.5, kill_grace_seconds=5.0, range_items=10_000_000)


def test_a_template_stopped_by_the_workers_own_clock_is_not_run_again():
    with TemplateSandbox(COOPERATIVE) as box:
        first = box.render(SLOW, {"messages": [{"role": "user", "content": "hi"}]})
        assert first == Outcome("limit", message="render took longer than 0.5 s", line=1)
        again = box.render(SLOW, {"messages": [{"role": "user", "content": "hello"}]})
        assert again == Outcome("limit", message="not run: this template already took longer than 0.5 s")
        assert box.started == 1  # stopped cooperatively: the worker was not killed


def test_a_slow_template_pays_its_time_limit_once_across_conversations_and_named_templates():
    fast = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    old = json.dumps({"chat_template": [{"name": "default", "template": fast},
                                        {"name": "tool_use", "template": fast}]}).encode()
    new = json.dumps({"chat_template": [{"name": "default", "template": SLOW},
                                        {"name": "tool_use", "template": SLOW}]}).encode()
    change, sources = make_change({"tokenizer_config.json": old}, {"tokenizer_config.json": new})
    findings = rendered(analyse, change, sources, RULES, limits=COOPERATIVE)
    # 2 templates x 8 conversations would be 8 s at 0.5 s each; remembered, it is one limit
    # (bench/bench_bounds.py times it)
    assert [(f.code, f.summary) for f in findings] == [
        ("chat_template.render_limit_exceeded",
         "chat template exceeds the render limits on 8 of 8 conversations "
         "(one user turn, no generation prompt: render took longer than 0.5 s)"),
        ("chat_template.render_limit_exceeded",
         "chat template 'tool_use' exceeds the render limits on 8 of 8 conversations "
         "(one user turn, no generation prompt: render took longer than 0.5 s)"),
    ]

"""How long the tracker's bounds take to stop hostile input: the timings the tests do not assert.

Run: python bench/bench_bounds.py

The tests check that each bound holds (the right refusal, the worker killed or not, nothing
run twice); how fast it holds depends on the machine's load, so it is measured here instead.
Each line prints the wall time, the bound it is about and their ratio. On an idle machine every
ratio is well under 1; a ratio over 1 on an idle machine is a regression.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.findings.sources import make_change, rendered
from tracker.adapters.template_sandbox import TemplateSandbox
from tracker.core.findings import chat_template
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import analyse as analyse_tokenizer
from tracker.core.templates import Limits

RULES = SeverityRules.default()
FAST = Limits(render_seconds=0.5, kill_grace_seconds=0.3)
COOPERATIVE = Limits(render_seconds=0.5, kill_grace_seconds=5.0, range_items=10_000_000)
LOOP_BOMB = (
    "{% set s = 'x' * 1000 %}"
    "{% for a in s %}{% for b in s %}{% for c in s %}{% endfor %}{% endfor %}{% endfor %}"
)
SLOW = (
    "{% for i in range(90000) %}{% for j in range(10) %}{% if messages[0]['content'] == 'x' %}x{% endif %}"
    "{% endfor %}{% endfor %}{{ messages[0]['content'] }}"
)


def timed(label: str, bound: float, work: Callable[[], object]) -> None:
    started = time.monotonic()
    work()
    took = time.monotonic() - started
    print(f"{label:<72} {took:7.3f} s  bound {bound:6.2f} s  ratio {took / bound:5.2f}")


def main() -> None:
    with TemplateSandbox(FAST) as box:
        box.render("{{ 1 }}", {})  # the worker is warm, as in the daemon
        timed("sandbox: range(10**9) refused by range() itself", 0.4,
              lambda: box.render("{% for i in range(10**9) %}{{ i }}{% endfor %}", {}))
        timed("sandbox: nested range bomb stopped by the range budget", FAST.render_seconds,
              lambda: box.render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                                 "{% endfor %}", {}))
        timed("sandbox: loop bomb killed at the render limit (+ kill grace)",
              FAST.render_seconds + FAST.kill_grace_seconds + 0.5, lambda: box.render(LOOP_BOMB, {}))
        timed("sandbox: the same bomb again is not run", 0.05, lambda: box.render(LOOP_BOMB, {}))
        huge = "{{ 'x' }}" * (5 * 1024 * 1024 // 9 + 1)
        timed("sandbox: 5 MB template refused unparsed", 0.2, lambda: box.check(huge))

    config = json.dumps({"bos_token": "<s>", "eos_token": "</s>"}).encode()

    def template_change(old: str, new: str) -> None:
        change, sources = make_change({"chat_template.jinja": old.encode(), "tokenizer_config.json": config},
                                      {"chat_template.jinja": new.encode(), "tokenizer_config.json": config})
        rendered(chat_template.analyse, change, sources, RULES, limits=FAST)

    timed("chat template: a looping template over 8 conversations, one limit", 3.0,
          lambda: template_change("{{ 1 }}", LOOP_BOMB))

    fast = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    old = json.dumps({"chat_template": [{"name": "default", "template": fast},
                                        {"name": "tool_use", "template": fast}]}).encode()
    new = json.dumps({"chat_template": [{"name": "default", "template": SLOW},
                                        {"name": "tool_use", "template": SLOW}]}).encode()
    change, sources = make_change({"tokenizer_config.json": old}, {"tokenizer_config.json": new})
    timed("chat template: a slow template x 2 names x 8 conversations, one limit", 3.0,
          lambda: rendered(chat_template.analyse, change, sources, RULES, limits=COOPERATIVE))

    pad = "x" * 250
    vocab = {f"{pad}{i:07d}": i for i in range(200_000)}
    tok = {"model": {"type": "WordLevel", "vocab": vocab, "unk_token": f"{pad}0000000"}}
    old_bytes = json.dumps(tok).encode()
    for i in range(1, 101):
        del vocab[f"{pad}{i:07d}"]
        vocab[f"new{i}"] = i
    change, sources = make_change({"tokenizer.json": old_bytes}, {"tokenizer.json": json.dumps(tok).encode()})
    timed("tokenizer: a 50 MB tokenizer.json diffed and drifted", 10.0,
          lambda: analyse_tokenizer(change, sources, RULES))


if __name__ == "__main__":
    main()

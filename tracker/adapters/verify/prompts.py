"""The sample prompts of a causal LM, rendered through each revision's chat template in the sandbox.

The prompts are the tracker's own: the canonical conversations of ``data/conversations.json`` (with the
generation prompt), then one user turn per text of the multilingual sample. A revision with a chat
template gets them rendered by :class:`~tracker.adapters.template_sandbox.TemplateSandbox` (never
by Jinja in this process); one without gets the user's text as it is. The template is found with
transformers' precedence: ``chat_template.jinja``, then ``chat_template.json``, then
``tokenizer_config.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.adapters.template_sandbox import TemplateSandbox
from tracker.core.findings.chat_template import RENDER_CLOCK, TOKEN_KEYS, canonical_conversations

_MAX_TEMPLATE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Prompts:
    texts: tuple[str, ...]
    rendered: int  # how many went through the chat template
    failed: int  # renders the sandbox refused or that raised (the plain text is used instead)


def conversations(texts: tuple[str, ...], count: int) -> list[list[dict[str, Any]]]:
    """``count`` sample conversations: the canonical ones first, then one user turn per sample text."""
    convs = [list(c.messages) for c in canonical_conversations() if c.add_generation_prompt and not c.tools]
    convs += [[{"role": "user", "content": text}] for text in texts]
    return convs[:count]


def _read(path: Path) -> Any:
    if not path.is_file() or path.stat().st_size > _MAX_TEMPLATE_BYTES:
        return None
    try:
        return json.loads(path.read_text("utf-8")) if path.suffix == ".json" else path.read_text("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def template_of(folder: Path) -> tuple[str | None, dict[str, str]]:
    """The default chat template of a downloaded revision (None without one) and its special tokens."""
    config = _read(folder / "tokenizer_config.json")
    config = config if isinstance(config, dict) else {}
    tokens = {}
    for key in TOKEN_KEYS:
        value = config.get(key)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            tokens[key] = value
    candidates = [_read(folder / "chat_template.jinja")]
    from_json = _read(folder / "chat_template.json")
    candidates.append(from_json.get("chat_template") if isinstance(from_json, dict) else None)
    candidates.append(config.get("chat_template"))
    for value in candidates:
        if isinstance(value, list):  # named templates: the one called "default"
            value = next((t.get("template") for t in value if isinstance(t, dict) and t.get("name") == "default"), None)
        if isinstance(value, str) and value.strip():
            return value, tokens
    return None, tokens


def render_prompts(folder: Path, convs: list[list[dict[str, Any]]], sandbox: TemplateSandbox) -> Prompts:
    """Each conversation as the revision's chat template renders it (with the generation prompt)."""
    template, tokens = template_of(folder)
    texts: list[str] = []
    rendered = failed = 0
    for messages in convs:
        plain = str(messages[-1].get("content") or "")
        if template is None:
            texts.append(plain)
            continue
        variables: Mapping[str, Any] = {"messages": messages, "add_generation_prompt": True, **tokens}
        outcome = sandbox.render(template, variables, now=RENDER_CLOCK)
        if outcome.ok and outcome.output:
            texts.append(outcome.output)
            rendered += 1
        else:
            texts.append(plain)
            failed += 1
    return Prompts(tuple(texts), rendered, failed)

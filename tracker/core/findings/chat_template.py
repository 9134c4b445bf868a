"""Chat template findings: what prompt the model now sees.

A chat template change is invisible in a file diff that says
``tokenizer_config.json changed`` and yet decides every prompt the model
receives. So we find the templates of both revisions the way transformers
loads them, compile the new ones, and render old and new on a fixed set of
canonical conversations (``data/conversations.json``), each with and without
``add_generation_prompt``. Findings then say what changed in the *rendered
prompt*, with a compact diff, rather than only that the Jinja text changed.

Where templates live, and which wins (as transformers' tokenizer loads them):

1. ``chat_template.jinja`` (the ``default`` template) and
   ``additional_chat_templates/<name>.jinja`` (named templates). If either
   exists they replace whatever ``tokenizer_config.json`` holds.
2. otherwise ``chat_template.json`` (``{"chat_template": ...}``, the legacy
   processor file);
3. otherwise ``tokenizer_config.json`` ``chat_template``: a string (the
   ``default``) or a list of ``{"name", "template"}``.

Every compile and render goes through the analysis's ``TemplateRenderer`` (``tracker/core/templates.py``),
in production ``tracker/adapters/template_sandbox.py``:
Jinja's immutable sandbox in a worker process with time, output and memory
limits, so a hostile template yields a finding, never a hang or an escape.
The analyser reads files only through ``inputs``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from importlib import resources
from typing import Any

from tracker.core.bounded import loads_json
from tracker.core.diff import common_affixes
from tracker.core.findings import libraries as lib
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange, Snapshot
from tracker.core.templates import Outcome, TemplateRenderer

CATEGORY = "chat_template"

TEMPLATE_FILE = "chat_template.jinja"
LEGACY_TEMPLATE_JSON = "chat_template.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
EXTRA_TEMPLATE_DIR = "additional_chat_templates/"
_FIXED_PATHS = (TEMPLATE_FILE, LEGACY_TEMPLATE_JSON, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)

# Special tokens transformers passes to templates (it passes its whole special_tokens_map).
TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")

# strftime_now reads this clock, so old and new render the same date (and tests are stable).
RENDER_CLOCK = datetime(2024, 7, 23, 12, 0, 0)

DIFF_MAX_LINES = 40
DIFF_MAX_LINE_CHARS = 240
SHOWN_PROMPT_CHARS = 2000


# ----------------------------------------------------------------------------- canonical conversations


@dataclass(frozen=True, eq=False)
class Conversation:
    """One canonical conversation in one variant (with or without the generation prompt)."""

    id: str  # "one_turn", "one_turn+gen"
    title: str  # "one user turn, with generation prompt"
    messages: tuple[Any, ...]
    add_generation_prompt: bool
    tools: Any = None
    documents: Any = None
    variables: tuple[tuple[str, Any], ...] = ()  # extra template variables (derived conversations)


@lru_cache(maxsize=1)
def canonical_conversations() -> tuple[Conversation, ...]:
    """The shipped conversations, each without then with ``add_generation_prompt`` (``+gen`` ids)."""
    data = json.loads(
        resources.files("tracker.core.findings").joinpath("data/conversations.json").read_text("utf-8")
    )
    out = []
    for conv in data["conversations"]:
        tools = data["tools"] if conv.get("with_tools") else None
        for gen in (False, True):
            out.append(
                Conversation(
                    id=conv["id"] + ("+gen" if gen else ""),
                    title=conv["title"] + (", with generation prompt" if gen else ", no generation prompt"),
                    messages=tuple(conv["messages"]),
                    add_generation_prompt=gen,
                    tools=tools,
                )
            )
    return tuple(out)


# Roles whose message answers a tool call (they follow an assistant tool call, like "tool").
_TOOL_RESULT_ROLES = frozenset({"tool", "ipython", "function", "tool_response", "observation", "tool_result"})
_CANONICAL_ROLES = frozenset({"user", "assistant", "system", "tool"})
_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")
_DATE_WORDS = ("date", "today", "time", "now")
DERIVED_MAX = 12
"""Derived conversations per template pair (each in two variants); the rest are not rendered."""


def _variants(cid: str, title: str, messages: list[Any], **kw: Any) -> list[Conversation]:
    return [
        Conversation(id=cid + ("+gen" if gen else ""),
                     title=title + (", with generation prompt" if gen else ", no generation prompt"),
                     messages=tuple(messages), add_generation_prompt=gen, **kw)
        for gen in (False, True)
    ]


def derived_conversations(features: Mapping[str, list[str]]) -> tuple[Conversation, ...]:
    """Conversations that reach the branches the canonical ones never do, from what a template tests.

    A role it compares against (``developer``, ``ipython``...) gets a conversation with
    that role; message keys for reasoning get an assistant turn carrying them;
    ``documents`` gets documents; a free variable (``enable_thinking``,
    ``date_string``, ``builtin_tools``) gets the one-turn conversation rendered with it
    set (both ``true`` and ``false``, or a date for date-like names).
    """
    data = json.loads(
        resources.files("tracker.core.findings").joinpath("data/conversations.json").read_text("utf-8")
    )
    tools = data["tools"]
    user = {"role": "user", "content": "What is the capital of France?"}
    call = {"role": "assistant", "tool_calls": [{"id": "call00001", "type": "function", "function": {
        "name": "get_current_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}}}]}
    out: list[Conversation] = []
    for role in features.get("roles", []):
        if role in _CANONICAL_ROLES:
            continue
        if role in _TOOL_RESULT_ROLES:
            result = {"role": role, "tool_call_id": "call00001", "name": "get_current_weather",
                      "content": '{"temperature": 22, "unit": "celsius"}'}
            out += _variants(f"role:{role}", f"a {role} message answering a tool call",
                             [{"role": "user", "content": "What is the weather in Paris right now?"}, call, result],
                             tools=tools)
        else:
            out += _variants(f"role:{role}", f"a {role} message",
                             [{"role": role, "content": "Answer in one word."}, user])
    keys = set(features.get("keys", []))
    for key in _REASONING_KEYS:
        if key in keys:
            out += _variants(f"key:{key}", f"an assistant turn with {key}", [
                {"role": "user", "content": "What is 2 + 2?"},
                {"role": "assistant", "content": "4.", key: "2 + 2 is 4."},
                {"role": "user", "content": "And times 3?"},
            ])
    variables = features.get("variables", [])
    if "documents" in keys or "documents" in variables:
        out += _variants("documents", "documents given", [user], documents=[
            {"title": "Paris", "text": "Paris is the capital and largest city of France."}])
    one_turn = [{"role": "user", "content": "Hello, who are you?"}]
    for name in variables:
        if name == "documents":
            continue
        if any(w in name.lower() for w in _DATE_WORDS):
            out += _variants(f"var:{name}", f"{name} set to a date", one_turn, variables=((name, "26 Jul 2024"),))
        else:
            for value in (True, False):
                out += _variants(f"var:{name}={str(value).lower()}", f"{name} set to {str(value).lower()}",
                                 one_turn, variables=((name, value),))
    return tuple(out[: 2 * DERIVED_MAX])


# ----------------------------------------------------------------------------- finding the templates


@dataclass(frozen=True)
class TemplateSource:
    name: str  # "default" or the named template's name
    path: str  # the file it was read from
    text: str


@dataclass
class SideTemplates:
    """The templates of one revision as transformers would load them, plus its special tokens.

    ``complete`` is False when a file that decides the templates could not be
    read; then we cannot say which templates this side has.
    """

    templates: dict[str, TemplateSource] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    complete: bool = True


def _relevant_entries(snapshot: Snapshot) -> dict[str, str]:
    return {
        f.path: f.content_id
        for f in snapshot.files
        if f.path in _FIXED_PATHS or f.path.startswith(EXTRA_TEMPLATE_DIR)
    }


def _extra_template_paths(snapshot: Snapshot) -> list[str]:
    """``additional_chat_templates/*.jinja`` directly in the folder, as transformers globs them."""
    return sorted(
        f.path
        for f in snapshot.files
        if f.path.startswith(EXTRA_TEMPLATE_DIR)
        and f.path.endswith(".jinja")
        and "/" not in f.path[len(EXTRA_TEMPLATE_DIR) :]
    )


def _decode(raw: bytes, path: str, side: SideTemplates) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        side.unreadable.append((path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"))
        return None


def _load_json(raw: bytes, path: str, side: SideTemplates) -> dict[str, Any] | None:
    text = _decode(raw, path, side)
    if text is None:
        return None
    try:
        data = loads_json(text)  # bounded: depth and size (tracker/core/bounded.py)
    except ValueError as exc:
        side.unreadable.append((path, f"not valid JSON ({exc})"))
        return None
    if not isinstance(data, dict):
        side.unreadable.append((path, f"not a JSON object ({type(data).__name__})"))
        return None
    return data


def _templates_from_value(value: Any, path: str, side: SideTemplates) -> dict[str, TemplateSource] | None:
    """A ``chat_template`` value: a string, or a list of ``{"name", "template"}``; None if malformed."""
    if isinstance(value, str):
        return {"default": TemplateSource("default", path, value)}
    if isinstance(value, list):
        out: dict[str, TemplateSource] = {}
        for item in value:
            if not (
                isinstance(item, dict)
                and isinstance(item.get("name"), str)
                and isinstance(item.get("template"), str)
            ):
                side.unreadable.append(
                    (path, "chat_template list entry is not {'name': str, 'template': str}")
                )
                return None
            out[item["name"]] = TemplateSource(item["name"], path, item["template"])
        return out
    side.unreadable.append((path, f"chat_template is a {type(value).__name__}, not a string or a list"))
    return None


def _token_content(value: Any) -> str | None:
    """A special token as a string: tokenizer files hold either "tok" or {"content": "tok", ...}."""
    if isinstance(value, str):
        return value
    content = value.get("content") if isinstance(value, dict) else None
    return content if isinstance(content, str) else None


def resolve_templates(inputs: RevisionInputs, side_name: str, snapshot: Snapshot) -> SideTemplates:
    """The templates and special tokens of one revision, with transformers' precedence."""
    side = SideTemplates()
    config: dict[str, Any] | None = None
    raw_config = inputs.text(side_name, TOKENIZER_CONFIG)
    if raw_config is not None:
        config = _load_json(raw_config, TOKENIZER_CONFIG, side)

    # Special tokens: tokenizer_config.json wins over special_tokens_map.json, as in transformers.
    raw_map = inputs.text(side_name, SPECIAL_TOKENS_MAP)
    special_map = _load_json(raw_map, SPECIAL_TOKENS_MAP, side) if raw_map is not None else None
    for source in (special_map, config):
        for key in TOKEN_KEYS:
            token = _token_content((source or {}).get(key))
            if token is not None:
                side.tokens[key] = token

    if _read_jinja_files(inputs, side_name, snapshot, side):
        return side

    raw_legacy = inputs.text(side_name, LEGACY_TEMPLATE_JSON)
    if raw_legacy is not None:
        legacy = _load_json(raw_legacy, LEGACY_TEMPLATE_JSON, side)
        found = (
            _templates_from_value(legacy.get("chat_template"), LEGACY_TEMPLATE_JSON, side) if legacy else None
        )
        if found is None:
            side.complete = False
        else:
            side.templates.update(found)
        return side

    if raw_config is not None:
        if config is None:
            side.complete = False
        elif "chat_template" in config and config["chat_template"] is not None:
            found = _templates_from_value(config["chat_template"], TOKENIZER_CONFIG, side)
            if found is None:
                side.complete = False
            else:
                side.templates.update(found)
    return side


def _read_jinja_files(inputs: RevisionInputs, side_name: str, snapshot: Snapshot, side: SideTemplates) -> bool:
    """Read ``chat_template.jinja`` and ``additional_chat_templates/*.jinja`` into ``side``; False if there are none.

    Where they exist they win: the legacy JSON file and tokenizer_config.json are not read.
    """
    jinja_files: list[tuple[str, str]] = []  # (name, path)
    if inputs.text(side_name, TEMPLATE_FILE) is not None:
        jinja_files.append(("default", TEMPLATE_FILE))
    for path in _extra_template_paths(snapshot):
        jinja_files.append((path[len(EXTRA_TEMPLATE_DIR) : -len(".jinja")], path))
    for name, path in jinja_files:
        raw = inputs.text(side_name, path)
        text = _decode(raw, path, side) if raw is not None else None
        if text is None:
            side.complete = False
            continue
        side.templates[name] = TemplateSource(name, path, text)
    return bool(jinja_files)


# ----------------------------------------------------------------------------- text helpers


def _escape(text: str) -> str:
    """Whitespace made visible: in a prompt "\\n\\n" versus "\\n" is the change that matters."""
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return text[:half] + "…" + text[-(limit - 1 - half) :]


def _show(text: str, limit: int = 80) -> str:
    """A short quoted form of a prompt fragment for summaries."""
    return "'" + _clip(_escape(text), limit) + "'"


def _trim_diff(lines: list[str]) -> str:
    shown = [_clip(line, DIFF_MAX_LINE_CHARS) for line in lines[:DIFF_MAX_LINES]]
    if len(lines) > DIFF_MAX_LINES:
        shown.append(f"… {len(lines) - DIFF_MAX_LINES} more diff lines")
    return "\n".join(shown)


_SEGMENT_CUT = re.compile(r"\n|\{[{%#]|[}%#]\}")


def template_segments(text: str) -> list[str]:
    """Split a template into lines *and* Jinja tags, escaped, for diffing.

    Many Hub templates are one long line (they are stored as a JSON string), so a
    plain line diff would show the whole template as changed; cutting before
    ``{%``/``{{``/``{#`` and after ``%}``/``}}``/``#}`` and newlines shows the
    tags that were added or removed. Whitespace-only pieces stay with the piece
    before them.
    """
    pieces: list[str] = []
    start = 0
    for match in _SEGMENT_CUT.finditer(text):
        cut = match.start() if match.group().startswith("{") else match.end()
        if cut > start:
            piece = text[start:cut]
            if pieces and not piece.strip():
                pieces[-1] += piece
            else:
                pieces.append(piece)
            start = cut
    tail = text[start:]
    if tail:
        if pieces and not tail.strip():
            pieces[-1] += tail
        else:
            pieces.append(tail)
    return [_escape(p) for p in pieces]


def template_diff(old: TemplateSource, new: TemplateSource) -> str:
    """A trimmed unified diff of two templates, one Jinja tag or line per diff line."""
    lines = difflib.unified_diff(
        template_segments(old.text),
        template_segments(new.text),
        fromfile=f"old/{old.path}",
        tofile=f"new/{new.path}",
        n=1,
        lineterm="",
    )
    return _trim_diff(list(lines))


def rendered_diff(old: str, new: str, label: str) -> str:
    """A trimmed unified diff of two rendered prompts, line by line, whitespace escaped."""
    lines = difflib.unified_diff(
        [_escape(line) for line in old.splitlines(keepends=True)],
        [_escape(line) for line in new.splitlines(keepends=True)],
        fromfile=f"old: {label}",
        tofile=f"new: {label}",
        n=2,
        lineterm="",
    )
    return _trim_diff(list(lines))


_TOKEN_EDGE_MAX = 40  # how far a change is widened to whole tokens


def describe_change(old: str, new: str) -> str:
    """One phrase for how ``new`` differs from ``old``: what was removed, added or replaced, and where.

    The differing span is widened to whole words or special tokens (up to
    whitespace, or to the ``>`` / ``<`` between ``<|tokens|>``), so a reader sees
    ``'<|begin_of_text|>' with '<s>'`` rather than ``'|begin_of_text|' with 's'``.
    """
    prefix, suffix = common_affixes(old, new)
    # A whitespace-only change is shown as it is; anything else is widened to whole tokens.
    widen = (
        _TOKEN_EDGE_MAX
        if old[prefix : len(old) - suffix].strip() or new[prefix : len(new) - suffix].strip()
        else 0
    )
    for _ in range(widen):  # widen left unless a token boundary is already there
        if prefix == 0 or old[prefix - 1].isspace() or old[prefix - 1] == ">":
            break
        if any(prefix < len(s) - suffix and s[prefix] == "<" for s in (old, new)):
            break
        prefix -= 1
    for _ in range(widen):  # widen right likewise
        if suffix == 0 or old[len(old) - suffix].isspace() or old[len(old) - suffix] == "<":
            break
        if any(len(s) - suffix - 1 >= prefix and s[len(s) - suffix - 1] == ">" for s in (old, new)):
            break
        suffix -= 1
    removed = old[prefix : len(old) - suffix]
    added = new[prefix : len(new) - suffix]
    if suffix == 0 and prefix > 0:
        where = "at the end"
    elif prefix == 0 and suffix > 0:
        where = "at the start"
    elif prefix == 0 and suffix == 0:
        where = "throughout"
    else:
        where = f"after {_show(old[max(0, prefix - 30) : prefix], 40)}"
    if not added:
        return f"removes {_show(removed)} {where}"
    if not removed:
        return f"adds {_show(added)} {where}"
    return f"replaces {_show(removed)} with {_show(added)} {where}"


def _label(name: str) -> str:
    return "chat template" if name == "default" else f"chat template {name!r}"


def _clean(text: str | None) -> str | None:
    """Drop lone surrogates a template may emit, so findings always encode as UTF-8."""
    if text is None:
        return None
    return text.encode("utf-8", "replace").decode("utf-8")


# ----------------------------------------------------------------------------- the analyser


class _Renderer:
    """Compiles and renders through the analysis's renderer, caching by (template, tokens, conversation)."""

    def __init__(self, sandbox: TemplateRenderer) -> None:
        self.sandbox = sandbox
        self._checks: dict[str, Outcome] = {}
        self._renders: dict[tuple[str, str, str], Outcome] = {}
        self._features: dict[str, dict[str, list[str]]] = {}

    def features(self, text: str) -> dict[str, list[str]]:
        """What ``text`` tests (roles, free variables, message keys); empty when it cannot be analysed."""
        if text not in self._features:
            found = self.sandbox.features(text) if self.check(text).ok else None
            self._features[text] = found or {"roles": [], "variables": [], "keys": []}
        return self._features[text]

    def conversations(self, *texts: str) -> tuple[Conversation, ...]:
        """The canonical conversations plus those derived from every template in ``texts``."""
        merged: dict[str, list[str]] = {"roles": [], "variables": [], "keys": []}
        for text in texts:
            for key, values in self.features(text).items():
                merged[key] = sorted(set(merged[key]) | set(values))
        return canonical_conversations() + derived_conversations(merged)

    def check(self, text: str) -> Outcome:
        if text not in self._checks:
            self._checks[text] = self.sandbox.check(text)
        return self._checks[text]

    def render(self, text: str, tokens: Mapping[str, str], conv: Conversation) -> Outcome:
        key = (text, json.dumps(dict(tokens), sort_keys=True), conv.id)
        if key not in self._renders:
            checked = self.check(text)
            if not checked.ok:
                self._renders[key] = checked
            else:
                variables = {
                    "messages": list(conv.messages),
                    "add_generation_prompt": conv.add_generation_prompt,
                    "tools": conv.tools,
                    "documents": conv.documents,
                    **tokens,
                    **dict(conv.variables),
                }
                self._renders[key] = self.sandbox.render(text, variables, now=RENDER_CLOCK)
        return self._renders[key]


@analyser(library=lib.TRANSFORMERS, order=70, renders=True)
def analyse(
    change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules, *, renderer: TemplateRenderer | None = None
) -> list[Finding]:
    """Findings for the chat templates of ``change``.

    On the first revision read (``change.old`` is None) there is nothing to
    compare, so only problems of the templates themselves are reported
    (does not compile, unsafe, over the limits), not "added".
    """
    if change.old is not None:
        old_entries, new_entries = _relevant_entries(change.old), _relevant_entries(change.new)
        if old_entries and old_entries == new_entries:
            return []  # no file that holds a template or a special token changed

    new = resolve_templates(inputs, "new", change.new)
    findings = [
        rules.finding(
            "chat_template.unreadable",
            CATEGORY,
            f"{path} is unreadable: {why}; its chat template cannot be loaded",
            path=path,
            evidence={"reason": why},
        )
        for path, why in new.unreadable
    ]
    if not new.complete:
        return findings

    old = resolve_templates(inputs, "old", change.old) if change.old is not None else None
    baseline = old is None or not old.complete
    old_templates = {} if baseline or old is None else old.templates
    old_tokens = {} if old is None else old.tokens

    names = sorted(set(old_templates) | set(new.templates), key=lambda n: (n != "default", n))
    if not names:
        return findings

    rendering = _Renderer(_required(renderer))
    for name in names:
        findings.extend(
            _one_template(rules, rendering, old_templates.get(name), new.templates.get(name),
                          old_tokens=old_tokens, new_tokens=new.tokens, baseline=baseline)
        )
    return findings


def _required(renderer: TemplateRenderer | None) -> TemplateRenderer:
    if renderer is None:
        raise TypeError("rendering chat templates needs a TemplateRenderer (tracker/core/templates.py), "
                        "handed to the analysis by the pipeline")
    return renderer


def template_findings(
    rules: SeverityRules,
    before: TemplateSource | None,
    after: TemplateSource | None,
    old_tokens: Mapping[str, str],
    new_tokens: Mapping[str, str],
    *,
    baseline: bool = False,
    renderer: TemplateRenderer | None = None,
) -> list[Finding]:
    """The findings for one template found elsewhere (e.g. embedded in a GGUF file), as for a tokenizer's.

    ``before`` None: the template is new (reported as added unless ``baseline``,
    and checked alone); ``after`` None: it was removed.
    """
    if before is None and after is None:
        return []
    return _one_template(rules, _Renderer(_required(renderer)), before, after,
                         old_tokens=old_tokens, new_tokens=new_tokens, baseline=baseline)


def _one_template(
    rules: SeverityRules,
    renderer: _Renderer,
    before: TemplateSource | None,
    after: TemplateSource | None,
    *,
    old_tokens: Mapping[str, str],
    new_tokens: Mapping[str, str],
    baseline: bool,
) -> list[Finding]:
    if after is None:
        assert before is not None
        return [
            rules.finding(
                "chat_template.removed",
                CATEGORY,
                f"{_label(before.name)} removed (was in {before.path})",
                path=before.path,
                before=before.path,
                evidence={"template": before.name},
            )
        ]
    if before is None:
        findings: list[Finding] = []
        if not baseline:
            findings.append(
                rules.finding(
                    "chat_template.added",
                    CATEGORY,
                    f"{_label(after.name)} added in {after.path}",
                    path=after.path,
                    after=after.path,
                    evidence={"template": after.name, "length": len(after.text)},
                )
            )
        return findings + _check_alone(rules, renderer, after, new_tokens)
    return _compare(rules, renderer, before, after, old_tokens=old_tokens, new_tokens=new_tokens)


def _template_problem(
    rules: SeverityRules, checked: Outcome, template: TemplateSource, text_diff: str | None
) -> Finding | None:
    """The finding for a template that cannot be rendered at all (too large, does not compile, unsafe)."""
    evidence: dict[str, Any] = {"template": template.name, "error": checked.message, "line": checked.line}
    if checked.line is not None:
        lines = template.text.splitlines()
        if 0 < checked.line <= len(lines):
            evidence["source_line"] = _clip(lines[checked.line - 1], DIFF_MAX_LINE_CHARS)
    if text_diff is not None:
        evidence["text_diff"] = text_diff
    where = f" (line {checked.line})" if checked.line is not None else ""
    label = _label(template.name)
    if checked.status == "too_large":
        return rules.finding(
            "chat_template.too_large",
            CATEGORY,
            f"{label} in {template.path} is too large to check: {checked.message}",
            path=template.path,
            after=len(template.text),
            evidence=evidence,
        )
    if checked.status == "unsafe":
        return rules.finding(
            "chat_template.unsafe",
            CATEGORY,
            f"{label} in {template.path} reaches for Python internals{where}: {checked.message}",
            path=template.path,
            after=checked.message,
            evidence=evidence,
        )
    if checked.status in ("syntax_error", "error", "limit"):
        return rules.finding(
            "chat_template.compile_failed",
            CATEGORY,
            f"{label} in {template.path} does not compile{where}: {checked.message}",
            path=template.path,
            after=checked.message,
            evidence=evidence,
        )
    return None


def _check_alone(
    rules: SeverityRules, renderer: _Renderer, template: TemplateSource, tokens: Mapping[str, str]
) -> list[Finding]:
    """A template with nothing to compare to: report only what is wrong with it.

    Render errors are not reported: a template may rightly refuse a conversation
    (no tool support, no system role). Going past the limits or reaching for
    internals is always worth reporting.
    """
    problem = _template_problem(rules, renderer.check(template.text), template, None)
    if problem is not None:
        return [problem]
    outcomes = {conv: renderer.render(template.text, tokens, conv) for conv in renderer.conversations(template.text)}
    return _unsafe_or_limits(rules, template, outcomes, {}, None)


def _unsafe_or_limits(
    rules: SeverityRules,
    template: TemplateSource,
    new: Mapping[Conversation, Outcome],
    old: Mapping[Conversation, Outcome],
    text_diff: str | None,
) -> list[Finding]:
    """Unsafe during a render (critical, whatever the old one did), and limits the old template kept."""
    total = len(new)
    for outcome in new.values():
        if outcome.status == "unsafe":
            problem = _template_problem(rules, outcome, template, text_diff)
            assert problem is not None
            return [problem]
    limited = [
        conv
        for conv, out in new.items()
        if out.status == "limit" and old.get(conv, Outcome("ok")).status != "limit"
    ]
    if not limited:
        return []
    first = limited[0]
    evidence: dict[str, Any] = {
        "template": template.name,
        "conversations": [c.id for c in limited],
        "first": first.id,
        "error": new[first].message,
        "line": new[first].line,
    }
    if text_diff is not None:
        evidence["text_diff"] = text_diff
    return [
        rules.finding(
            "chat_template.render_limit_exceeded",
            CATEGORY,
            f"{_label(template.name)} exceeds the render limits on {len(limited)} of {total} "
            f"conversations ({first.title}: {new[first].message})",
            path=template.path,
            after=new[first].message,
            evidence=evidence,
        )
    ]


@dataclass(frozen=True)
class _Rendered:
    """Both sides of one template rendered on the same conversations, and what every finding shows."""

    before: TemplateSource
    after: TemplateSource
    convs: tuple[Conversation, ...]
    old: dict[Conversation, Outcome]
    new: dict[Conversation, Outcome]
    text_changed: bool
    tokens_changed: dict[str, list[str | None]]
    text_diff: str | None

    @property
    def label(self) -> str:
        return _label(self.after.name)

    def common(self) -> dict[str, Any]:
        """The evidence every comparison finding carries."""
        common: dict[str, Any] = {"template": self.after.name}
        if self.text_diff is not None:
            common["text_diff"] = self.text_diff
        if self.tokens_changed:
            common["tokens_changed"] = self.tokens_changed
        return common


def _compare(
    rules: SeverityRules,
    renderer: _Renderer,
    before: TemplateSource,
    after: TemplateSource,
    *,
    old_tokens: Mapping[str, str],
    new_tokens: Mapping[str, str],
) -> list[Finding]:
    findings = _moved(rules, before, after)
    text_changed = before.text != after.text
    tokens_changed = {
        key: [old_tokens.get(key), new_tokens.get(key)]
        for key in TOKEN_KEYS
        if old_tokens.get(key) != new_tokens.get(key)
    }
    if not text_changed and not tokens_changed:
        return findings

    checked = renderer.check(after.text)
    diffable = checked.status != "too_large" and len(before.text) <= renderer.sandbox.limits.source_chars
    text_diff = template_diff(before, after) if text_changed and diffable else None
    problem = _template_problem(rules, checked, after, text_diff)
    if problem is not None:
        return [*findings, problem]

    convs = renderer.conversations(before.text, after.text)
    new = {conv: renderer.render(after.text, new_tokens, conv) for conv in convs}
    old = {conv: renderer.render(before.text, old_tokens, conv) for conv in convs}
    rendered = _Rendered(before, after, convs, old=old, new=new, text_changed=text_changed,
                         tokens_changed=tokens_changed, text_diff=text_diff)
    hostile = _unsafe_or_limits(rules, after, rendered.new, rendered.old, text_diff)
    findings.extend(hostile)
    if any(f.code == "chat_template.unsafe" for f in hostile):
        return findings
    return findings + _render_changes(rules, rendered, hostile=bool(hostile))


def _moved(rules: SeverityRules, before: TemplateSource, after: TemplateSource) -> list[Finding]:
    if before.path == after.path or before.text != after.text:
        return []
    return [
        rules.finding(
            "chat_template.moved",
            CATEGORY,
            f"{_label(after.name)} moved from {before.path} to {after.path}, text unchanged",
            path=after.path,
            before=before.path,
            after=after.path,
            evidence={"template": after.name},
        )
    ]


def _render_changes(rules: SeverityRules, rendered: _Rendered, *, hostile: bool) -> list[Finding]:
    """Conversations whose prompt changed, that now fail or now render; else that the text alone changed."""
    old, new, convs = rendered.old, rendered.new, rendered.convs
    changed = [c for c in convs if old[c].ok and new[c].ok and old[c].output != new[c].output]
    failed = [c for c in convs if old[c].ok and new[c].status == "error"]
    recovered = [c for c in convs if not old[c].ok and new[c].ok]
    findings: list[Finding] = []
    if changed:
        findings.append(_prompt_changed(rules, rendered, changed))
    if failed:
        findings.append(_render_failed(rules, rendered, failed))
    if recovered:
        findings.append(_render_recovered(rules, rendered, recovered))
    if rendered.text_changed and not (changed or failed or recovered or hostile):
        findings.append(_render_same(rules, rendered))
    return findings


def _prompt_changed(rules: SeverityRules, rendered: _Rendered, changed: list[Conversation]) -> Finding:
    convs, after = rendered.convs, rendered.after
    first = changed[0]
    old_out, new_out = rendered.old[first].output or "", rendered.new[first].output or ""
    description = describe_change(old_out, new_out)
    only = _only_when(changed, convs)
    cause = " and ".join(
        part
        for part, flag in (("template text", rendered.text_changed), ("special tokens", bool(rendered.tokens_changed)))
        if flag
    )
    return rules.finding(
        "chat_template.rendered_prompt_changed",
        CATEGORY,
        ("" if after.name == "default" else f"{rendered.label}: ")
        + f"rendered prompt changed for {len(changed)} of {len(convs)} conversations"
        + (f" ({only})" if only else "")
        + f"; {first.title}: {description}",
        path=after.path,
        before=_clean(_clip(old_out, SHOWN_PROMPT_CHARS)),
        after=_clean(_clip(new_out, SHOWN_PROMPT_CHARS)),
        evidence={
            **rendered.common(),
            "changed": [c.id for c in changed],
            "unchanged": [c.id for c in convs if c not in changed],
            "first": first.id,
            "change": _clean(description),
            "cause": cause,
            "rendered_diff": _clean(rendered_diff(old_out, new_out, first.id)),
            "branches": _branches(changed, rendered.old, rendered.new),
        },
    )


def _render_failed(rules: SeverityRules, rendered: _Rendered, failed: list[Conversation]) -> Finding:
    first = failed[0]
    error = rendered.new[first]
    return rules.finding(
        "chat_template.render_failed",
        CATEGORY,
        f"{rendered.label} now fails on {len(failed)} of {len(rendered.convs)} conversations that rendered "
        f"before; {first.title}: {error.message}",
        path=rendered.after.path,
        before="rendered",
        after=error.message,
        evidence={
            **rendered.common(),
            "failed": [c.id for c in failed],
            "first": first.id,
            "error": error.message,
            "line": error.line,
        },
    )


def _render_recovered(rules: SeverityRules, rendered: _Rendered, recovered: list[Conversation]) -> Finding:
    first = recovered[0]
    return rules.finding(
        "chat_template.render_recovered",
        CATEGORY,
        f"{rendered.label} now renders {len(recovered)} of {len(rendered.convs)} conversations that failed "
        f"before; {first.title} failed with: {rendered.old[first].message}",
        path=rendered.after.path,
        before=rendered.old[first].message,
        after="rendered",
        evidence={**rendered.common(), "recovered": [c.id for c in recovered], "first": first.id},
    )


def _render_same(rules: SeverityRules, rendered: _Rendered) -> Finding:
    lines = (rendered.text_diff or "").splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return rules.finding(
        "chat_template.text_changed_render_same",
        CATEGORY,
        f"{rendered.label} text changed (+{added} −{removed} pieces) but renders identically on all "
        f"{len(rendered.convs)} conversations",
        path=rendered.after.path,
        evidence={**rendered.common(), "rendered": [c.id for c in rendered.convs if rendered.new[c].ok]},
    )


BRANCHES_SHOWN = 8


def _branches(
    changed: list[Conversation], old: Mapping[Conversation, Outcome], new: Mapping[Conversation, Outcome]
) -> dict[str, dict[str, str | None]]:
    """Per changed conversation (one per branch reached), what changed and the rendered diff.

    Only one variant of each conversation is shown (the one without the generation
    prompt when both changed); at most ``BRANCHES_SHOWN``, in conversation order.
    """
    out: dict[str, dict[str, str | None]] = {}
    seen: set[str] = set()
    for conv in changed:
        base = conv.id.removesuffix("+gen")
        if base in seen:
            continue
        seen.add(base)
        before, after = old[conv].output or "", new[conv].output or ""
        out[conv.id] = {"title": conv.title, "change": _clean(describe_change(before, after)),
                        "rendered_diff": _clean(rendered_diff(before, after, conv.id))}
        if len(out) == BRANCHES_SHOWN:
            break
    return out


def _only_when(changed: list[Conversation], convs: tuple[Conversation, ...]) -> str | None:
    """Say so when exactly the conversations with (or without) the generation prompt changed."""
    changed_ids = {c.id for c in changed}
    for flag, words in ((False, "without"), (True, "with")):
        if changed_ids == {c.id for c in convs if c.add_generation_prompt is flag}:
            return f"exactly those {words} the generation prompt"
    return None

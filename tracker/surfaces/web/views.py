"""What each page shows, built from stored rows and findings. Pure: data in, data out.

The templates only lay out what these functions return; every decision about which finding goes
in which section, how a value is written and which diff is shown is made (and tested) here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tracker.core.estimate.cards import CARDS_BY_NAME
from tracker.core.model import Category, Finding, RawDiff, Severity, StoredEstimate, clip_words
from tracker.surfaces.web.diffs import SideBySide, side_by_side

# The categories a reader looks for first (the reference page's "config, tokenizer, chat template
# or weights"), then the rest; anything unknown goes last, in name order.
CATEGORY_LABELS: dict[str, str] = {
    "config": "Config",
    "generation": "Generation config",
    "tokenizer": "Tokenizer",
    "chat_template": "Chat template",
    "weights": "Weights",
    "code": "Remote code",
    "licence": "Licence",
    "dependencies": "Dependencies",
    "consistency": "Consistency",
    "estimate": "Estimator",
    "repo": "Repo",
    "files": "Files",
    "embeddings": "Embeddings",
    "sentence_transformers": "Sentence Transformers",
    "diffusers": "Diffusers",
    "gguf": "GGUF",
    "exports": "Exports (ONNX, OpenVINO)",
    "manifest": "Shard index",
    "adapter": "Adapter (PEFT)",
    "processor": "Processor",
    "preprocessing": "Preprocessing",
    "analysis": "Analysis",
    "upstream": "Upstream files",
}
# Every category is filterable: one the labels above forgot gets its name, at the end.
CATEGORY_LABELS.update({c.value: c.value.replace("_", " ").capitalize() for c in Category
                        if c.value not in CATEGORY_LABELS})
SEVERITIES = tuple(s.value for s in Severity)  # critical .. info
VALUE_SHOWN = 400  # characters of a before/after value shown inline
TIMELINE_PAGE = 50  # revisions per page of a repo's timeline
ADVISORY_PAGE = 50  # advisories per page of the list of all
SEARCH_SHOWN = 20  # matches shown per kind on the search page

# What to do about a finding, by category: the next step a reader takes before moving a pin.
ADVICE: dict[str, str] = {
    "config": "Load the new revision in a test and compare outputs before you move your pin; "
              "keep the old sha pinned if you depend on the old behaviour.",
    "generation": "Check that generation stops and samples as you expect at the new revision (eos ids, "
                  "lengths, sampling defaults), or pass the values you rely on explicitly.",
    "tokenizer": "Re-tokenize a sample of your own inputs with both revisions and compare ids; "
                 "cached token ids and fine-tunes depend on them.",
    "chat_template": "Render your own conversations with both templates and compare the prompts; "
                     "fine-tuned adapters and evaluations assume the old prompt format.",
    "weights": "Treat re-uploaded or new weight files as a new model: verify hashes, and never load a "
               "pickle you have not scanned (prefer safetensors, or torch.load(weights_only=True)).",
    "code": "Read the remote code diff before running with trust_remote_code; pin the revision you reviewed.",
    "licence": "Check the new licence and gating terms against your use before you move your pin.",
    "dependencies": "Upgrade or pin the named Python packages to a version without the listed vulnerabilities.",
    "consistency": "The files of this revision disagree with each other; test loading it before you rely on it.",
    "estimate": "Re-check your hardware plan: memory and batch sizes moved with the config or the weights.",
    "repo": "The repo itself changed (renamed, rewritten, gated, deleted): check the id and revisions you pin.",
    "files": "Review the files added or removed; nothing the tracker analyses changed meaning.",
}
GENERIC_ADVICE = "Read the finding's evidence on the revision page, and test the new revision before you move your pin."


def shown_text(text: Any) -> str:
    """Text as the pages write it: one arrow (→) for every change, whatever wrote the summary."""
    return str(text if text is not None else "").replace(" -> ", " → ")


@dataclass(frozen=True)
class Pages:
    """Where a paged list is: page ``number`` of ``count`` (1-based; count is at least 1)."""

    number: int
    count: int

    @property
    def older(self) -> int | None:
        return self.number + 1 if self.number < self.count else None

    @property
    def newer(self) -> int | None:
        return self.number - 1 if self.number > 1 else None


def paging(page: str, total: int, size: int) -> Pages:
    """The page asked for (``?page=``), clamped to the pages there are; anything not a number is page 1."""
    count = max(1, -(-total // size))
    number = int(page) if page.isdigit() and len(page) <= 6 else 1
    return Pages(number=min(max(number, 1), count), count=count)


@dataclass(frozen=True)
class AdvisoryFilters:
    severities: tuple[str, ...]  # empty: any
    severity: str
    category: str
    library: str
    since: datetime | None
    since_text: str

    def matches(self, categories: Sequence[str], libraries: Sequence[str]) -> bool:
        return ((not self.category or self.category in categories)
                and (not self.library or self.library in libraries))


def advisory_filters(*, severity: str, category: str, library: str, since: str) -> AdvisoryFilters:
    """The advisories page's filters, checked: ``severity`` is a minimum; a bad value is a ValueError saying why."""
    severity, category, library, since = (v.strip().lower() for v in (severity, category, library, since))
    severities: tuple[str, ...] = ()
    if severity:
        if severity not in SEVERITIES:
            raise ValueError(f"Unknown severity {severity[:40]!r}: give one of {', '.join(SEVERITIES)}.")
        severities = SEVERITIES[: SEVERITIES.index(severity) + 1]
    if category and category not in CATEGORY_LABELS:
        raise ValueError(f"Unknown category {category[:40]!r}: give one of {', '.join(sorted(CATEGORY_LABELS))}.")
    since_at = None
    if since:
        try:
            since_at = datetime.fromisoformat(since.upper().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"Invalid date {since[:40]!r}: give YYYY-MM-DD.") from None
        if since_at.tzinfo is None:
            since_at = since_at.replace(tzinfo=UTC)
    return AdvisoryFilters(severities=severities, severity=severity, category=category, library=library[:100],
                           since=since_at, since_text=since[:40])


def filter_query(params: Mapping[str, str]) -> str:
    """The filters of a request as a query string prefix for page links ("severity=high&"), page left out."""
    from urllib.parse import urlencode

    kept = [(k, params[k]) for k in ("severity", "category", "library", "since") if params.get(k)]
    return urlencode(kept) + "&" if kept else ""


@dataclass(frozen=True)
class CodeExplained:
    code: str
    category: str
    label: str
    severity: str
    why: str
    advice: str
    filterable: bool  # the advisories page can filter on this category


def explain_code(code: str, severity: str, why: str) -> CodeExplained:
    """A finding code's page: what it is about, its severity and why, and what to do."""
    category = code.split(".", 1)[0]
    return CodeExplained(code=code, category=category, label=category_label(category), severity=severity,
                         why=why, advice=ADVICE.get(category, GENERIC_ADVICE), filterable=category in CATEGORY_LABELS)


def severity_rank(value: str | None) -> int:
    return SEVERITIES.index(value) if value in SEVERITIES else len(SEVERITIES)


def worst(values: Iterable[str]) -> str | None:
    ranked = sorted(values, key=severity_rank)
    return ranked[0] if ranked and ranked[0] in SEVERITIES else None


def category_label(category: str) -> str:
    return CATEGORY_LABELS.get(category, category.replace("_", " ").capitalize())


def show_value(value: Any, limit: int = VALUE_SHOWN) -> str:
    """A before/after value as a person reads it: text as is, anything else as compact JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return clip_words(text, limit)


def when(value: datetime | None) -> str:
    """A UTC time to the minute, as the pages write every time ("2026-12-01 14:05 UTC")."""
    if value is None:
        return "never"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


# -- findings grouped by category (the timeline) ------------------------------------------------


@dataclass(frozen=True)
class FindingGroup:
    category: str
    label: str
    worst: str | None
    findings: tuple[Finding, ...]


def group_findings(findings: Sequence[Finding]) -> list[FindingGroup]:
    """Findings by category, categories in reading order, findings most severe first within each."""
    by_category: dict[str, list[Finding]] = {}
    for f in findings:
        by_category.setdefault(f.category or "other", []).append(f)
    order = list(CATEGORY_LABELS)
    ranked = sorted(by_category, key=lambda c: (order.index(c) if c in order else len(order), c))
    return [
        FindingGroup(category=c, label=category_label(c),
                     worst=worst(f.severity.value for f in by_category[c]),
                     findings=tuple(sorted(by_category[c], key=lambda f: f.severity.rank)))
        for c in ranked
    ]


# -- the revision page's sections -----------------------------------------------------------------


@dataclass(frozen=True)
class RenderedPrompt:
    conversation: str
    title: str
    change: str
    diff: SideBySide


@dataclass(frozen=True)
class TemplateChange:
    finding: Finding
    text_diff: SideBySide | None
    prompts: tuple[RenderedPrompt, ...]
    tokens_changed: tuple[tuple[str, str, str], ...]  # (special token, before, after)


@dataclass(frozen=True)
class KeyChange:
    path: str
    key: str
    before: str
    after: str
    finding: Finding


@dataclass(frozen=True)
class TokenChange:
    """A tokenizer finding and its examples, as (token, what happened to it) pairs."""

    finding: Finding
    direction: str  # added | removed | changed
    examples: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class TensorChange:
    finding: Finding
    tensors: tuple[tuple[str, str, str], ...]  # (name, dtype, shape)
    names: tuple[tuple[str, tuple[str, ...]], ...]  # ("added", (...)), ("removed", ...), ("moved", ...)


@dataclass(frozen=True)
class LibraryGroup:
    """Findings of one library ("any library": the repo's files whatever loads them)."""

    label: str
    worst: str
    findings: tuple[Finding, ...]


def library_groups(findings: Sequence[Finding]) -> tuple[LibraryGroup, ...]:
    """The revision's findings grouped by the library whose analyser found them, most severe group first."""
    from tracker.core.findings.libraries import group_by_library, library_label

    return tuple(LibraryGroup(label=library_label(name), worst=str(items[0].severity.value), findings=tuple(items))
                 for name, items in group_by_library(sorted(findings, key=lambda f: f.severity.rank)))


@dataclass(frozen=True)
class EmbeddingsVerdict:
    """``embeddings.incompatible``: why stored vectors no longer compare, and the module pipeline on each side."""

    finding: Finding
    reasons: tuple[str, ...]
    before: tuple[str, ...]  # module types, in pipeline order
    after: tuple[str, ...]


def _embeddings_verdict(f: Finding) -> EmbeddingsVerdict:
    evidence = f.evidence

    def names(key: str) -> tuple[str, ...]:
        value = evidence.get(key)
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    return EmbeddingsVerdict(finding=f, reasons=names("reasons"), before=names("pipeline_before"),
                             after=names("pipeline_after"))


@dataclass(frozen=True)
class RevisionSections:
    templates: tuple[TemplateChange, ...] = ()
    keys: tuple[KeyChange, ...] = ()
    tokens: tuple[TokenChange, ...] = ()
    tensors: tuple[TensorChange, ...] = ()
    others: tuple[FindingGroup, ...] = ()
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # added/removed/changed paths
    embeddings: tuple[EmbeddingsVerdict, ...] = ()
    libraries: tuple[LibraryGroup, ...] = ()


def _prompts(evidence: Mapping[str, Any]) -> tuple[RenderedPrompt, ...]:
    branches = evidence.get("branches")
    out = []
    if isinstance(branches, Mapping) and branches:
        for conv, branch in branches.items():
            if isinstance(branch, Mapping) and isinstance(branch.get("rendered_diff"), str):
                out.append(RenderedPrompt(str(conv), str(branch.get("title") or conv), str(branch.get("change") or ""),
                                          side_by_side(branch["rendered_diff"])))
    elif isinstance(evidence.get("rendered_diff"), str):
        first = str(evidence.get("first") or "")
        out.append(RenderedPrompt(first, first, str(evidence.get("change") or ""),
                                  side_by_side(evidence["rendered_diff"])))
    return tuple(out)


def _template_change(f: Finding) -> TemplateChange:
    evidence = f.evidence
    text = evidence.get("text_diff")
    tokens = evidence.get("tokens_changed") or {}
    pairs = tuple((str(k), show_value(v[0]) if v[0] is not None else "(none)",
                   show_value(v[1]) if v[1] is not None else "(none)")
                  for k, v in tokens.items() if isinstance(v, list | tuple) and len(v) == 2)
    return TemplateChange(finding=f, text_diff=side_by_side(text) if isinstance(text, str) else None,
                          prompts=_prompts(evidence), tokens_changed=pairs)


def _key_change(f: Finding) -> KeyChange:
    evidence = f.evidence
    key = evidence.get("key")
    if not isinstance(key, str):
        keys = evidence.get("keys")
        key = ", ".join(map(str, keys)) if isinstance(keys, list) and keys else f.code
    return KeyChange(path=f.path or "", key=key,
                     before="(absent)" if f.before is None else show_value(f.before),
                     after="(absent)" if f.after is None else show_value(f.after), finding=f)


def _distinct_keys(keys: Sequence[KeyChange]) -> list[KeyChange]:
    """One row per (file, key, before, after): two findings about the same change (an eos id seen by the
    config and the generation rules) show once, at the worse severity."""
    kept: dict[tuple[str, str, str, str], KeyChange] = {}
    for k in keys:
        ident = (k.path, k.key, k.before, k.after)
        held = kept.get(ident)
        if held is None or k.finding.severity.rank < held.finding.severity.rank:
            kept[ident] = k
    return list(kept.values())


def _token_label(example: Mapping[str, Any]) -> str:
    for key in ("token", "content", "text"):
        if key in example:
            return show_value(example[key], 80)
    return show_value(dict(example), 80)


def _token_detail(example: Mapping[str, Any]) -> str:
    if "old_id" in example or "new_id" in example:
        return f"id {example.get('old_id')} → {example.get('new_id')}"
    if "id" in example:
        return f"id {example['id']}"
    if "old" in example or "new" in example:
        return f"{show_value(example.get('old'), 80)} → {show_value(example.get('new'), 80)}"
    return ""


def _token_change(f: Finding) -> TokenChange | None:
    evidence = f.evidence
    examples = evidence.get("examples")
    code = f.code
    if not isinstance(examples, list) or not examples:
        return None
    direction = "added" if "added" in code else "removed" if "removed" in code else "changed"
    return TokenChange(finding=f, direction=direction,
                       examples=tuple((_token_label(e), _token_detail(e)) if isinstance(e, Mapping)
                                      else (show_value(e, 80), "") for e in examples))


def _tensor_change(f: Finding) -> TensorChange | None:
    evidence = f.evidence
    tensors = evidence.get("tensors")
    rows: list[tuple[str, str, str]] = []
    if isinstance(tensors, Mapping):
        for name, info in tensors.items():
            if isinstance(info, Mapping):
                shape = info.get("shape")
                rows.append((str(name), str(info.get("dtype", "")),
                             " × ".join(map(str, shape)) if isinstance(shape, list) else ""))
    names = tuple((kind, tuple(map(str, evidence[kind]))) for kind in ("added", "removed", "moved")
                  if isinstance(evidence.get(kind), list) and evidence[kind])
    if not rows and not names:
        return None
    return TensorChange(finding=f, tensors=tuple(rows), names=names)


def revision_sections(findings: Sequence[Finding], diff: RawDiff | None) -> RevisionSections:
    """The revision page's sections; each finding appears in one section only (the rest under "Other")."""
    templates, keys, tokens, tensors, rest = [], [], [], [], []
    embeddings = []
    for f in findings:
        category = f.category
        evidence = f.evidence
        if f.code == "embeddings.incompatible":
            embeddings.append(_embeddings_verdict(f))
        elif category == "chat_template" and any(k in evidence for k in ("text_diff", "rendered_diff", "branches")):
            templates.append(_template_change(f))
        elif category in ("config", "generation") and (f.before is not None or f.after is not None
                                                       or "key" in evidence):
            keys.append(_key_change(f))
        elif category == "tokenizer" and (token := _token_change(f)) is not None:
            tokens.append(token)
        elif category == "weights" and (tensor := _tensor_change(f)) is not None:
            tensors.append(tensor)
        else:
            rest.append(f)
    keys = _distinct_keys(keys)
    files = diff.files if diff is not None else None
    paths = {kind: tuple(str(e.get("path")) for e in (files or {}).get(kind) or [] if isinstance(e, Mapping))
             for kind in ("added", "removed", "changed")}
    return RevisionSections(templates=tuple(templates), keys=tuple(keys), tokens=tuple(tokens),
                            tensors=tuple(tensors), others=tuple(group_findings(rest)),
                            files={k: v for k, v in paths.items() if v}, embeddings=tuple(embeddings),
                            libraries=library_groups(findings))


# -- the estimator's card table ---------------------------------------------------------------------


@dataclass(frozen=True)
class CardRow:
    card: str
    full: str
    lora: str
    serve: str
    cost: str


@dataclass(frozen=True)
class EstimateView:
    supported: bool
    reason: str
    params: str
    checkpoint: str
    full_gb: str
    lora_gb: str
    seq_len: str
    lora_rank: str
    cards: tuple[CardRow, ...]


def _batch(value: Any, borderline: Any = False) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return "?"
    if value == 0:
        return "does not fit"
    return f"batch {value}, borderline" if borderline else f"batch {value}"


def _gb(value: Any) -> str:
    return f"{value:.3g} GB" if isinstance(value, int | float) and not isinstance(value, bool) else "?"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "not read"


def estimate_view(est: StoredEstimate) -> EstimateView:
    """The stored estimate as the reference page's card table."""
    cards = []
    for c in est.cards:
        if not isinstance(c, Mapping):
            continue
        card = CARDS_BY_NAME.get(str(c.get("card")))
        cost = c.get("cost_usd")
        cards.append(CardRow(
            card=card.label if card else str(c.get("card")),
            full=_batch(c.get("full_batch"), c.get("full_borderline")),
            lora=_batch(c.get("lora_batch"), c.get("lora_borderline")),
            serve=_batch(c.get("serve_batch")),
            cost=f"${cost:,.2f} {c.get('cost_mode') or ''}".strip() if isinstance(cost, int | float) else "-"))
    return EstimateView(
        supported=bool(est.supported), reason=str(est.reason or ""),
        params=_count(est.params), checkpoint=_count(est.checkpoint_params),
        full_gb=_gb(est.full_finetune_gb), lora_gb=_gb(est.lora_gb),
        seq_len=str(est.seq_len or "?"), lora_rank=str(est.lora_rank or "?"),
        cards=tuple(cards))


# -- the advisory page's estimate changes: cards × (full fine-tune, LoRA, serving), before → after ------

BATCH_MODES = (("full_batch", "Full fine-tune"), ("lora_batch", "LoRA"), ("serve_batch", "Serving"))
FIGURE_NAMES = {"params": "Parameters", "active_params": "Active parameters", "checkpoint_params": "Checkpoint parameters",
                "seq_len": "Sequence length", "full_finetune_gb": "Full fine-tune memory, batch 1",
                "lora_gb": "LoRA memory, batch 1"}
BAR_WIDTH = 96  # the inline bar's width in CSS px: the larger of a cell's two batches
# Findings said once per card that the estimate table shows as a whole: the advisory page lists each once.
PER_CARD_CODES = frozenset({"estimate.serve_batch_changed", "estimate.fit_lost", "estimate.fit_gained"})


@dataclass(frozen=True)
class BatchCell:
    """One card and mode: the largest batch before and after, and the bar's lengths (0..BAR_WIDTH)."""

    changed: bool
    before: str = ""
    after: str = ""
    before_len: float = 0.0
    after_len: float = 0.0
    direction: str = ""  # up | down | "" (a batch that was or became unknown)


@dataclass(frozen=True)
class CardChange:
    card: str
    cells: tuple[BatchCell, ...]  # in BATCH_MODES order


@dataclass(frozen=True)
class FigureChange:
    name: str
    before: str
    after: str
    change: str  # "+1.4%", or "" when either side is unknown


@dataclass(frozen=True)
class EstimateChanges:
    figures: tuple[FigureChange, ...]
    cards: tuple[CardChange, ...]
    modes: tuple[str, ...] = tuple(label for _, label in BATCH_MODES)


def _batch_size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _batch_word(value: Any) -> str:
    size = _batch_size(value)
    if size is None:
        return "not estimated"
    return "does not fit" if size == 0 else str(size)


def _figure(key: str, before: Any, after: Any) -> FigureChange:
    def shown(value: Any) -> str:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return "unknown"
        return f"{value:.3g} GB" if key.endswith("_gb") else f"{value:,}"

    change = ""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (before, after)) and before:
        change = f"{(after - before) / before:+.1%}"
    return FigureChange(FIGURE_NAMES.get(key, key), shown(before), shown(after), change)


def _cell(value: Any) -> BatchCell:
    """A cell's bars: the larger of the two batches is the full width, so the bars draw the change itself."""
    if not isinstance(value, Mapping):
        return BatchCell(changed=False)
    before, after = _batch_size(value.get("before")), _batch_size(value.get("after"))
    top = max(before or 0, after or 0)
    direction = "" if before is None or after is None else ("up" if after > before else "down")
    return BatchCell(changed=True, before=_batch_word(value.get("before")), after=_batch_word(value.get("after")),
                     before_len=BAR_WIDTH * (before or 0) / top if top else 0.0,
                     after_len=BAR_WIDTH * (after or 0) / top if top else 0.0, direction=direction)


def estimate_changes(delta: Mapping[str, Any] | None) -> EstimateChanges | None:
    """An advisory's ``estimate_delta`` as a table: a row per card whose batch moved, a column per mode.

    A cell holds the largest batch before and after and a pair of bars, the larger full width, so a
    card that fell from 55 to 13 reads at a glance; a mode that did not move says so. The figures that are not per card (parameters, memory) are listed apart.
    """
    if not delta:
        return None
    figures: list[FigureChange] = []
    by_card: dict[str, dict[str, Any]] = {}
    for key, value in delta.items():
        card, _, mode = key.rpartition(".")
        if card and mode in dict(BATCH_MODES):
            by_card.setdefault(card, {})[mode] = value
        elif isinstance(value, Mapping):
            figures.append(_figure(key, value.get("before"), value.get("after")))
    order = {name: i for i, name in enumerate(CARDS_BY_NAME)}
    cards = tuple(CardChange(card=CARDS_BY_NAME[c].label if c in CARDS_BY_NAME else c,
                             cells=tuple(_cell(by_card[c].get(mode)) for mode, _ in BATCH_MODES))
                  for c in sorted(by_card, key=lambda c: (order.get(c, len(order)), c)))
    figure_order = list(FIGURE_NAMES.values())
    figures.sort(key=lambda f: (figure_order.index(f.name) if f.name in figure_order else len(figure_order), f.name))
    return EstimateChanges(figures=tuple(figures), cards=cards)


def advisory_findings(findings: Sequence[Any], *, table: bool) -> list[Mapping[str, Any]]:
    """An advisory's findings as its page lists them: once each, a per-card estimator finding once per code
    when the estimate table is on the page ("… and 7 more cards like it, in the estimate table")."""
    listed = [f for f in findings if isinstance(f, Mapping)]
    if not table:
        return listed
    out: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    for f in listed:
        code = str(f.get("code") or "")
        if code not in PER_CARD_CODES:
            out.append(f)
        elif code not in seen:
            seen.add(code)
            same = [g for g in listed if g.get("code") == code]
            more = len(same) - 1
            summary = str(f.get("summary") or "")
            if more:
                summary += f", and {more} more card{'s' if more > 1 else ''} like it (see the estimate changes)"
            out.append({**f, "summary": summary, "severity": worst(str(g.get("severity")) for g in same)})
    return out

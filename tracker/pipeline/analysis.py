"""One revision's analysis: plan and fetch its inputs in rounds, then run the pure analysers on them.

The analysers (``tracker/core/findings``) read nothing themselves: each runs on a frozen
:class:`~tracker.core.findings.inputs.RevisionInputs`. What an analyser needs is asked of the
analyser itself: run on the inputs fetched so far, it either completes, or stops at the first
thing it reads that they do not hold (:class:`~tracker.core.findings.inputs.NotRead`, naming the
key: a file's bytes, a safetensors or GGUF header, a pickle's globals, an ONNX model, weight bytes
at ranges computed from a header, a CPU budget check). That is its plan for the next round: the
key is fetched through the revision's reader (:class:`~tracker.pipeline.sources.HubSources`,
within the revision's budgets: request budget, header bytes, CPU time, caps) and the analyser runs
again over the larger inputs, round after round, while it wants something new (bounded: past
:func:`round_bound` rounds its last run reads what it lacks as None and the keys are logged;
``UNPLANNED_RAISES``, set by the test suite, makes that an error instead).

So the files a revision's analysers need are fetched in exactly the order the analysers read them
(the budgets run out where they did when analysers pulled their own bytes: the same pickles
scanned, the same headers read), and only those: what one analyser wants in some cases only (a
shard named by an index, a module folder named in ``modules.json``, a pickle's directory) is
planned from what its earlier rounds read. The first round of every revision is library detection:
each side's ``README.md`` and ``config.json``.

Each analyser's rounds keep their own inputs (the reader's caches are shared, as before): what one
analyser parsed is not held for the rest of the revision, so the header memory stays bounded by
``[limits] revision_header_bytes``. :class:`PlannedAnalysis` also gives the union of every
analyser's inputs: handed to :func:`tracker.core.findings.analyse_revision` with no reader at all,
it yields the same findings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tracker.core.bounded import json_object
from tracker.core.diff import diff_revisions
from tracker.core.errors import HubRateLimited, HubUnavailable, RevisionGone, first_line
from tracker.core.estimate import compare_estimates
from tracker.core.findings import call_analyser, failed, labelled, libraries_of, libraries_present, runs_for
from tracker.core.findings.inputs import (
    ALLOWS,
    GGUF,
    ONNX,
    PICKLE,
    RANGES,
    SAFETENSORS,
    TEXT,
    InputKey,
    NotRead,
    RevisionInputs,
    allows_key,
)
from tracker.core.findings.registry import Registered, registered
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import (
    CommitSha,
    Finding,
    RawDiff,
    RepoId,
    RevisionChange,
    Snapshot,
    StoredEstimate,
    sort_findings,
)
from tracker.core.templates import TemplateRenderer
from tracker.pipeline.ports import BlobCache, Clock, HubReader, OsvLookup, PipelineSettings
from tracker.pipeline.sources import GGUF_EXPANSION, HubSources, RevisionBudget

log = logging.getLogger("tracker.processing")

T = TypeVar("T")
TRANSIENT = (HubUnavailable, HubRateLimited, RevisionGone)  # the Hub failed, not the content: propagated
UNPLANNED_RAISES = False  # the test suite sets it: a read past the rounds' bound fails instead of reading None
Renderers = Callable[[], AbstractContextManager[TemplateRenderer]]


class InputReader(Protocol):
    """What fetches a revision's inputs: :class:`~tracker.pipeline.sources.HubSources` (test doubles too)."""

    def text(self, side: str, path: str) -> bytes | None: ...
    def safetensors_header(self, side: str, path: str) -> Any: ...
    def pickle_globals(self, side: str, path: str) -> Any: ...
    def gguf_header(self, side: str, path: str) -> Any: ...
    def onnx_model(self, side: str, path: str) -> Any: ...
    def read_ranges(self, side: str, path: str, ranges: Sequence[tuple[int, int]]) -> Any: ...
    def weight_budget(self) -> tuple[int, int]: ...
    def allows(self, what: str) -> bool: ...


_READS = {TEXT: "text", SAFETENSORS: "safetensors_header", PICKLE: "pickle_globals", GGUF: "gguf_header",
          ONNX: "onnx_model"}


def fetch(reader: InputReader, key: InputKey) -> Any:
    """The value of one input key, read (within the revision's budgets) by ``reader``."""
    kind = key[0]
    if kind == ALLOWS:
        return reader.allows(key[1])
    if kind == RANGES:
        return reader.read_ranges(key[1], key[2], list(key[3]))
    return getattr(reader, _READS[kind])(key[1], key[2])


def round_bound(change: RevisionChange) -> int:
    """How many rounds one analyser may take: a few keys per listed file, and some."""
    listed = len(change.new.files) + (len(change.old.files) if change.old is not None else 0)
    return 8 * listed + 256


class _FetchFailed(Exception):
    """The reader raised while fetching for an analyser (not a transient Hub failure): its ``analysis.failed``."""


@dataclass
class Rounds:
    """One revision's planned reads: each analyser's rounds, and the union of what they read."""

    change: RevisionChange
    reader: InputReader
    seen: dict[InputKey, Any] | None  # the union of every analyser's inputs, when kept (tests: it holds every header)
    budget: RevisionBudget | None = None  # the reader's: what one analyser's parsed GGUF headers may hold

    def inputs(self, values: dict[InputKey, Any], *, strict: bool = True,
               memo: dict[Any, Any] | None = None) -> RevisionInputs:
        return RevisionInputs({"old": self.change.old, "new": self.change.new}, values,
                              weight_compare=self.reader.weight_budget(), strict=strict,
                              memo={} if memo is None else memo)

    def get(self, key: InputKey) -> Any:
        """``key`` fetched now (also kept for the revision's union of inputs)."""
        try:
            value = fetch(self.reader, key)
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:
            raise _FetchFailed(exc) from exc
        if self.seen is not None:
            self.seen[key] = value
        return value

    def complete(self, run: Callable[[RevisionInputs], T], values: dict[InputKey, Any] | None = None) -> T:
        """``run`` on inputs that grow, one wanted key per round, until it completes (see the module)."""
        values = {} if values is None else values
        held = [0]
        memo: dict[Any, Any] = {}  # what the analyser computed in earlier rounds (RevisionInputs.remembered)
        for _ in range(round_bound(self.change)):
            try:
                return run(self.inputs(values, memo=memo))
            except NotRead as missing:
                wanted = [key for key in missing.keys if key not in values]
                if not wanted:
                    raise  # it holds the keys and still lacks them: a bug, never a loop
                for key in wanted:  # the one it lacked, then what it said it reads next (RevisionInputs.want)
                    values[key] = self.held(key, self.get(key), held)
        inputs = self.inputs(values, strict=UNPLANNED_RAISES, memo=memo)
        result = run(inputs)
        if inputs.unplanned:
            log.warning("%s@%s: past %d rounds of reads, %d more read as absent: %s", self.change.repo,
                        self.change.new_sha[:12], round_bound(self.change), len(inputs.unplanned),
                        ", ".join(map(repr, inputs.unplanned[:5])))
        return result

    def held(self, key: InputKey, value: Any, held: list[int]) -> Any:
        """``value``, unless it is a parsed GGUF header and the analyser's rounds already hold the revision's
        header memory (``[limits] revision_header_bytes``) of them: then None, skipped as over that budget.

        The reader's cache evicts by size; an analyser's inputs are held for all its rounds, so a GGUF
        header (up to some 8 bytes parsed per byte read) is held only while they fit (one always does).
        """
        if key[0] != GGUF or self.budget is None or not isinstance(value, Mapping):
            return value
        if held[0] >= self.budget.header_bytes:
            self.budget.skip("header_bytes", f"the GGUF header of {key[2]} (the analysis holds "
                                             f"{held[0]:,} bytes of parsed headers)")
            return None
        held[0] += int(value.get("header_bytes", 0)) * GGUF_EXPANSION
        return value


@dataclass(frozen=True)
class PlannedAnalysis:
    """The findings of a revision's analysers, and every input they were given (one RevisionInputs)."""

    findings: list[Finding]
    inputs: RevisionInputs | None  # with keep_inputs only


def _renderer(entry: Registered, renderers: Renderers | None) -> AbstractContextManager[TemplateRenderer | None]:
    return renderers() if entry.renders and renderers is not None else nullcontext(None)


def analyse_change(change: RevisionChange, reader: InputReader, rules: SeverityRules | None = None, *,
                   renderers: Renderers | None = None, keep_inputs: bool = False,
                   budget: RevisionBudget | None = None) -> PlannedAnalysis:
    """Plan, fetch and analyse one revision (see the module): its findings, most severe first.

    ``renderers`` opens the chat templates' renderer (``tracker/adapters/template_sandbox.py``), one
    per analyser that renders. Transient Hub failures and ``MemoryError`` propagate. ``keep_inputs``
    also returns every input the analysers were given, as one RevisionInputs (a poll does not keep
    them: each analyser's, or each part's, are dropped when it completes). ``budget``: the reader's
    (:class:`RevisionBudget`), which bounds the parsed GGUF headers one analyser's rounds hold.
    """
    rules = rules or SeverityRules.default()
    rounds = Rounds(change, reader, {} if keep_inputs else None, budget)
    detected: dict[InputKey, Any] = {}
    present = rounds.complete(lambda inputs: libraries_present(change, inputs), detected)
    findings: list[Finding] = []
    for entry in registered():
        if not runs_for(entry, present) or not rounds.get(allows_key(f"the {entry.name} analysis")):
            continue  # the revision's CPU time is spent (the reader records what was skipped)
        findings += _analysed(rounds, entry, rules, renderers, dict(detected))
    return PlannedAnalysis(sort_findings(findings), None if rounds.seen is None else rounds.inputs(rounds.seen))


def _analysed(rounds: Rounds, entry: Registered, rules: SeverityRules, renderers: Renderers | None,
              values: dict[InputKey, Any]) -> list[Finding]:
    """One analyser's findings over its rounds (from ``values``), a part at a time where it has parts.

    As when it runs whole: whatever it (or a fetch for it) raises is its one ``analysis.failed``.
    """
    parts: Sequence[Any] = entry.parts(rounds.change) if entry.parts is not None else [None]
    found: list[Finding] = []
    try:
        with _renderer(entry, renderers) as renderer:
            for part in parts:
                only = None if entry.parts is None else [part]

                def run(inputs: RevisionInputs, only: list[Any] | None = only) -> list[Finding]:
                    return call_analyser(entry, rounds.change, inputs, rules, renderer, only=only)

                found += rounds.complete(run, dict(values))
    except (*TRANSIENT, NotRead, MemoryError):
        raise
    except _FetchFailed as exc:
        return [failed(entry, exc.__cause__ or exc, rules)]
    except Exception as exc:
        return [failed(entry, exc, rules)]
    return labelled(entry, found)


# ----------------------------------------------------------------------------- one revision, read and analysed

Side = tuple[str, Snapshot]  # (sha, file list)


def safetensors_headers(sources: HubSources, side: str) -> dict[str, Any]:
    """The readable safetensors headers of every weight file on one side, by path (range reads only)."""
    rev = sources.revisions.get(side)
    if rev is None:
        return {}
    read = {f.path: sources.safetensors_header(side, f.path) for f in rev[1].files if f.path.endswith(".safetensors")}
    return {path: header for path, header in read.items() if header is not None}


def estimate_from_sources(sources: HubSources, side: str, *, checkpoint_params: int | None = None,
                          read_headers: bool = True) -> Any:
    """The estimate of one side's config.json, with its safetensors headers when asked; None without a config."""
    from tracker.core.estimate import estimate

    config = json_object(sources.text(side, "config.json"))
    if config is None:
        return _estimate_from_gguf(sources, side, read_headers=read_headers, checkpoint_params=checkpoint_params)
    headers = (safetensors_headers(sources, side) or None) if read_headers else None
    return estimate(config, checkpoint_params=checkpoint_params, checkpoint_headers=headers)


def _estimate_from_gguf(sources: HubSources, side: str, *, read_headers: bool,
                        checkpoint_params: int | None) -> Any:
    """A GGUF-only repo (a llama.cpp conversion): the config and the parameter count from its header."""
    from tracker.core.estimate import estimate
    from tracker.core.estimate.architectures import config_from_gguf
    from tracker.core.findings.gguf import gguf_params

    rev = sources.revisions.get(side)
    ggufs = sorted(f.path for f in rev[1].files if f.path.lower().endswith(".gguf")) if rev else []
    for path in ggufs:
        header = sources.gguf_header(side, path)
        config = config_from_gguf(header) if header else None
        if config is not None and header is not None:
            params = gguf_params(header) if read_headers else checkpoint_params
            return estimate(config, checkpoint_params=params)
    return None


def estimate_delta(old: Any, new: Any) -> dict[str, Any]:
    """What moved between two estimates, for the advisory: {key: {"before", "after"}}."""
    if old is None or not getattr(old, "supported", False) or not new.supported:
        return {}
    before_json, after_json = old.to_json(), new.to_json()
    delta: dict[str, Any] = {}
    for key in ("params", "active_params", "checkpoint_params", "seq_len", "full_finetune_gb", "lora_gb"):
        a, b = before_json.get(key), after_json.get(key)
        if key == "checkpoint_params" and a is None:
            continue  # the old count was not read (its headers were not fetched): nothing is known to move
        if a != b:
            delta[key] = {"before": a, "after": b}
    old_cards = {c["card"]: c for c in before_json["cards"]}
    for card in after_json["cards"]:
        before = old_cards.get(card["card"], {})
        for key in ("full_batch", "lora_batch", "serve_batch"):
            if before.get(key) != card.get(key):
                delta[f"{card['card']}.{key}"] = {"before": before.get(key), "after": card.get(key)}
    return delta


@dataclass(frozen=True)
class Analysis:
    """What comparing two revisions yields: the raw diff, the findings, the estimate (when rerun)."""

    raw: RawDiff
    findings: list[Finding]
    sources: HubSources
    estimate: StoredEstimate | None
    libraries: tuple[str, ...] = ()  # what the new side is loaded with
    old_libraries: tuple[str, ...] = ()

    def diff_json(self, old_sha: str, new_sha: str) -> dict[str, Any]:
        """``tracker diff --json`` and the API's diff: the findings, also grouped by library; files; texts."""
        from tracker.core.findings.libraries import group_by_library

        return {
            "from": old_sha, "to": new_sha,
            "libraries": {"old": list(self.old_libraries), "new": list(self.libraries)},
            "findings": [f.to_json() for f in self.findings],
            "by_library": {name: [f.to_json() for f in items] for name, items in group_by_library(self.findings)},
            "files": self.raw.files, "texts": self.raw.texts,
        }




def _one_line(exc: BaseException) -> str:
    """The error's class and its first line, for findings and the revision's last error."""
    return f"{type(exc).__name__}: {first_line(exc)[:300]}" if str(exc).strip() else type(exc).__name__


class RevisionAnalyst:
    """Reads and analyses revisions: polling, ``reanalyse`` and ``tracker diff`` all come through here.

    One revision: its reader (:class:`HubSources`, a fresh budget), its raw diff, its planned
    analysis (:func:`analyse_change`), unreadable files and spent budgets as findings, its estimate
    and its libraries; and the dependency lookups (OSV.dev) a revision's requirements ask for.
    """

    def __init__(self, settings: PipelineSettings, blobs: BlobCache, hub: HubReader, *, clock: Clock,
                 rules: SeverityRules, osv: OsvLookup | None = None, renderers: Renderers | None = None) -> None:
        self.settings = settings
        self.blobs = blobs
        self.hub = hub
        self.clock = clock
        self.rules = rules
        self.osv = osv
        self.renderers = renderers  # chat templates' renderer (the sandbox), one per analyser that renders

    def sources(self, repo_id: RepoId, *, old: Side | None, new: Side, strict: bool = False) -> HubSources:
        """The reads of one revision's analysis, with a fresh budget (``[limits] revision_*``)."""
        limits = self.settings.limits
        budget = RevisionBudget(requests=limits.revision_requests, header_bytes=limits.revision_header_bytes,
                                cpu_seconds=limits.revision_cpu)
        sources = HubSources(self.hub, self.blobs, repo_id, {"old": old, "new": new},
                             max_file_bytes=limits.max_file_bytes, max_header_bytes=limits.max_header_bytes,
                             now=self.clock, strict=strict, budget=budget)
        sources.weight_compare = (limits.weight_compare_requests, limits.weight_compare_bytes)
        return sources

    def analyse(self, repo_id: RepoId, old: Side | None, new: Side, *,
                old_estimate: StoredEstimate | None = None, strict: bool = False) -> Analysis:
        """Raw diff, findings and estimate between two snapshots (either from the store or the Hub).

        Polling, ``reanalyse`` and ``tracker diff`` all come through here, so they agree.
        An analyser that fails becomes an ``analysis.failed`` finding, never an exception. What
        the revision's budgets left out is one ``analysis.budget_exceeded`` finding per budget.
        A ``MemoryError`` drops everything read so far (the caches go with it) and the revision
        is completed with one ``analysis.failed`` finding; nothing else of it is analysed.
        """
        try:
            return self._analyse(repo_id, old, new, old_estimate=old_estimate, strict=strict)
        except MemoryError:
            log.warning("%s@%s: out of memory while analysing; the revision is completed unanalysed",
                        repo_id, new[0][:12])
        # outside the handler, so the traceback (and every frame holding what was parsed) is gone
        failed = self.rules.finding(
            "analysis.failed", "analysis", "analysis failed: MemoryError: the revision's content did not fit in "
            "memory; nothing of it was analysed", evidence={"step": "analysis", "exception": "MemoryError"})
        return Analysis(raw=RawDiff.from_json({"files": {}, "texts": {}}), findings=[failed],
                        sources=self.sources(repo_id, old=old, new=new, strict=strict), estimate=None)

    def _analyse(self, repo_id: RepoId, old: Side | None, new: Side, *,
                 old_estimate: StoredEstimate | None, strict: bool) -> Analysis:
        sources = self.sources(repo_id, old=old, new=new, strict=strict)
        failures: list[Finding] = []
        try:
            raw = RawDiff.from_json(diff_revisions(old[1] if old else None, new[1], sources.text))
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:  # hostile content must not stop the revision
            raw = RawDiff.from_json({"files": {}, "texts": {}})
            failures.append(self._failed("diff", exc))
        change = RevisionChange(repo=repo_id, old=old[1] if old else None, new=new[1],
                                old_sha=CommitSha(old[0]) if old else None, new_sha=CommitSha(new[0]))
        try:
            findings = analyse_change(change, sources, self.rules, renderers=self.renderers,
                                      budget=sources.budget).findings
        except (*TRANSIENT, MemoryError, NotRead):
            raise  # NotRead: only where UNPLANNED_RAISES (the test suite) asks for it
        except Exception as exc:
            findings = []
            failures.append(self._failed("findings", exc))
        for problem in sources.problems:
            findings.append(self.rules.finding(
                "upstream.file_unreadable", "files", f"{problem['path']} ({problem['side']}): {problem['reason']}",
                path=problem["path"], evidence=problem,
            ))
        try:
            estimate_json, estimate_findings = (self._estimate(raw, sources, old is not None, old_estimate)
                                                if sources.allows("the estimate") else (None, []))
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:
            estimate_json, estimate_findings = None, [self._failed("estimate", exc)]
        try:
            libraries = libraries_of(change.new, sources, "new")
            old_libraries = libraries_of(change.old, sources, "old")
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:
            libraries, old_libraries = (), ()
            failures.append(self._failed("libraries", exc))
        return Analysis(raw=raw, findings=sort_findings([*findings, *estimate_findings, *failures,
                                                         *self._over_budget(sources)]),
                        sources=sources, estimate=estimate_json, libraries=libraries, old_libraries=old_libraries)

    def _over_budget(self, sources: HubSources) -> list[Finding]:
        """One ``analysis.budget_exceeded`` finding per budget the revision ran out of, naming what was skipped."""
        budget = sources.budget
        limits = {"requests": f"{budget.requests:,} range requests ([limits] revision_requests)",
                  "header_bytes": f"{budget.header_bytes:,} bytes of parsed headers ([limits] revision_header_bytes)",
                  "cpu": f"{budget.cpu_seconds:g} s of CPU time ([limits] revision_cpu)"}
        out = []
        for name, skipped in sorted(budget.skipped.items()):
            count = budget.skipped_count[name]
            shown = "; ".join(skipped[:3]) + (f"; and {count - 3:,} more" if count > 3 else "")
            out.append(self.rules.finding(
                "analysis.budget_exceeded", "analysis",
                f"the revision's budget of {limits[name]} ran out: {count:,} skipped ({shown})",
                evidence={"budget": name, "limit": limits[name], "skipped_count": count, "skipped": skipped,
                          "requests_spent": budget.spent_requests}))
        return out

    def _failed(self, step: str, exc: BaseException) -> Finding:
        log.warning("analysis step %s failed: %s", step, _one_line(exc))
        return self.rules.finding("analysis.failed", "analysis", f"{step} failed: {_one_line(exc)}",
                                  evidence={"step": step, "exception": type(exc).__name__,
                                            "reason": _one_line(exc)})

    def _estimate(self, raw: RawDiff, sources: HubSources, has_old: bool,
                  old_estimate: StoredEstimate | None) -> tuple[StoredEstimate | None, list[Finding]]:
        """Rerun the estimator when the config or the weights moved (and on the first revision)."""
        if has_old and not any(p == "config.json" or p.endswith((".safetensors", ".gguf")) for p in raw.touched()):
            return None, []
        new = estimate_from_sources(sources, "new")
        if new is None:
            return None, []
        old = None
        if has_old:
            ckpt = old_estimate.checkpoint_params if old_estimate else None
            old = estimate_from_sources(sources, "old", checkpoint_params=ckpt, read_headers=False)
        findings = compare_estimates(old, new, self.rules)
        return StoredEstimate.from_json({**new.to_json(), "delta": estimate_delta(old, new)}), findings

    def dependencies(self, raw: RawDiff, sources: HubSources, baseline: bool) -> tuple[list[Finding], bool]:
        """Known vulnerabilities of the packages a revision asks for (OSV.dev); (findings, retry later)."""
        if self.osv is None:
            return [], False
        touched = raw.touched("added", "changed")
        if not baseline and not any(p in ("requirements.txt", "config.json") or p.endswith(".py") for p in touched):
            return [], False
        from tracker.core.advisory.dependencies import (
            collect_dependencies,
            unpinned_findings,
            vulnerability_findings,
        )

        snapshot = sources.revisions["new"][1]  # type: ignore[index]
        code = {f.path: sources.text("new", f.path) or b"" for f in snapshot.files if f.path.endswith(".py")}
        scan = collect_dependencies(requirements_txt=sources.text("new", "requirements.txt"),
                                    config=json_object(sources.text("new", "config.json")), remote_code=code)
        if not scan.queries:
            return unpinned_findings(scan, self.rules), False
        result = self.osv.querybatch([(q[0], q[1], q[2]) for q in scan.queries])
        findings, _ = vulnerability_findings(scan, result.vulns, self.rules)
        return findings + unpinned_findings(scan, self.rules), not result.ok

"""Commands that read what changed: revisions, diff, events, estimate."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from tracker.core.escaping import escape_controls
from tracker.core.model import Finding, sort_findings
from tracker.services import Revisions
from tracker.surfaces.cli import (  # the group and the helpers every command shares
    Context,
    arrows,
    emit_json,
    fail_cleanly,
    iso,
    main,
    minute,
    parse_repo_id,
    pass_tracker,
)

if TYPE_CHECKING:
    from tracker.app import Tracker
    from tracker.services import RevisionListing

# -- reading back -------------------------------------------------------------------------------


def _revision_json(rev: Any) -> dict[str, Any]:
    findings = rev.findings or ()
    return {
        "sha": rev.sha,
        "date": iso(rev.date),
        "title": rev.title,
        "status": rev.status,
        "baseline": rev.baseline,
        "parent": rev.parent_sha,
        "summary": rev.summary,
        "worst_severity": rev.worst_severity,
        "findings": len(findings),
        "top_findings": [
            {"code": f.code, "severity": f.severity.value, "summary": f.summary} for f in findings[:3]
        ],
        "files": {k: [e["path"] for e in v] for k, v in rev.diff.files.items()} if rev.diff is not None else {},
        "libraries": list(rev.libraries),
    }


@main.command()
@click.argument("repo_id")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--branch", default="main", show_default=True, help="For a repo not watched: the branch to list.")
@click.option("--limit", default=30, show_default=True, type=click.IntRange(min=1, max=1000),
              help="For a repo not watched: how many of the newest commits to list.")
@pass_tracker
def revisions(tracker: Tracker, repo_id: str, as_json: bool, branch: str, limit: int) -> None:
    """List the revisions read for a repo, oldest first, with what changed in each.

    A repo that is not watched is listed from the Hub (its newest commits; nothing is analysed or stored).
    """
    listing = Revisions(tracker).listing(parse_repo_id(repo_id), branch=branch, limit=limit)  # NotFound: exit 1
    if listing.repo is None:
        _upstream_revisions(listing, branch=branch, as_json=as_json)
        return
    repo, rows = listing.repo, listing.revisions
    if as_json:
        emit_json([_revision_json(r) for r in rows])
        return
    if not rows:
        click.echo(f"{repo.repo_id}: no revisions read yet; run `tracker poll {repo.repo_id}`")
        return
    for r in rows:
        date = r.date.strftime("%Y-%m-%d %H:%M") if r.date else "-"
        worst = f"[{r.worst_severity}] " if r.worst_severity else ""
        status = "" if r.status == "done" else f" ({r.status})"
        click.echo(f"{date}  {r.sha[:12]}  {worst}{escape_controls(r.title or '')}{status}")
        more = f"`tracker diff {repo.repo_id} {r.parent_sha[:12]} {r.sha[:12]}`" if r.parent_sha else "`--json`"
        for line in finding_lines(r.findings or (), more=more):
            click.echo(arrows(line))


FINDING_LINES = 6  # per revision in `tracker revisions`; the rest is one line saying where to read it


def finding_lines(findings: Sequence[Finding], *, more: str) -> list[str]:
    """Each finding once, with its code: findings that say the same thing (eos_token_id in config.json and in
    generation_config.json) share a line and list their codes; several of one code (serving on each of 8
    cards) are its first and a count."""
    entries: dict[str, list[Any]] = {}  # summary -> [severity, summary, codes, others of the same code]
    by_code: dict[str, str] = {}
    for f in findings:
        code, summary = f.code, escape_controls(f.summary).replace(" -> ", " → ")
        if code in by_code and by_code[code] != summary:
            entries[by_code[code]][3] += 1
            continue
        # The same change said twice (parameters, by the estimate and by the checkpoint's header): one line.
        summary = next((k for k in entries if len(min(k, summary, key=len)) >= 20 and (summary in k or k in summary)),
                       summary)
        entry = entries.setdefault(summary, [f.severity.value, summary, [], 0])
        if code not in entry[2]:
            entry[2].append(code)
        by_code.setdefault(code, summary)
    lines = [f"    - [{severity}] {summary}" + (f" (+{others} more like it)" if others else "") + f"  ({', '.join(codes)})"
             for severity, summary, codes, others in entries.values()]
    if len(lines) > FINDING_LINES:
        lines = [*lines[:FINDING_LINES], f"    (+{len(lines) - FINDING_LINES} more: {more})"]
    return lines


def _upstream_revisions(listing: RevisionListing, *, branch: str, as_json: bool) -> None:
    """The newest commits of a repo that is not watched, read from the Hub, oldest first."""
    repo_id, commits = listing.repo_id, listing.commits
    if as_json:
        emit_json([{"sha": c.sha, "date": iso(c.date), "title": c.title, "status": "not_read", "baseline": False,
                     "parent": c.parents[0] if c.parents else None, "summary": None, "worst_severity": None,
                     "findings": None, "top_findings": [], "files": {}} for c in commits])
        return
    click.echo(f"{repo_id} is not watched: its newest {len(commits)} commit(s) on {branch}, from the Hub "
               "(nothing analysed or stored; `tracker diff` compares two of them)", err=True)
    for c in commits:
        click.echo(f"{c.date.strftime('%Y-%m-%d %H:%M')}  {c.sha[:12]}  {escape_controls(c.title or '')}")


def verdict_lines(findings: list[Finding], libraries: tuple[str, ...] = ()) -> list[str]:
    """The verdicts a reader needs before anything else ("stored embeddings are no longer comparable..."),
    each followed by its causes and their evidence; for an embedding model without one, that its index stands."""
    from tracker.core.findings.libraries import SENTENCE_TRANSFORMERS, VERDICT_CODES

    lines = []
    for f in sort_findings(findings):
        if f.code in VERDICT_CODES:
            lines.append(f"{f.severity.value}: {escape_controls(f.summary)}  ({f.code})")
            reasons = f.evidence.get("reasons")
            lines += [f"  cause: {escape_controls(str(r))}" for r in reasons or [] if isinstance(reasons, list)]
    if not lines and SENTENCE_TRANSFORMERS in libraries and findings:
        lines.append("index: stored embeddings stay comparable (no change moves the vectors of stored items)")
    return lines


def format_findings(findings: list[Finding]) -> list[str]:
    """Findings grouped by library and category, groups ordered by their worst finding."""
    from tracker.core.findings.libraries import group_by_library, library_label

    lines = []
    for library, items in group_by_library(sort_findings(findings)):
        lines.append(f"{library_label(library)}:")
        categories: dict[str, list[Finding]] = {}
        for finding in items:
            categories.setdefault(finding.category, []).append(finding)
        for category, found in categories.items():
            lines.append(f"  {category}:")
            for f in found:
                lines.append(f"    [{f.severity.value:8}] {escape_controls(f.summary)}  ({f.code})")
    return lines


@main.command()
@click.argument("repo_id")
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_tracker
def diff(tracker: Tracker, repo_id: str, old: str, new: str, as_json: bool) -> None:
    """Show what changed between two revisions of any repo (stored when watched, else read from the Hub)."""
    repo_id = parse_repo_id(repo_id)
    compared = Revisions(tracker).compare(repo_id, old, new, arguments=("OLD", "NEW"))
    analysis = compared.analysis
    raw, findings = analysis.raw, analysis.findings
    if as_json:
        emit_json(analysis.diff_json(compared.old_sha, compared.new_sha))
        return
    for line in verdict_lines(findings, analysis.libraries):  # what a team with a vector index reads first
        click.echo(arrows(line))
    click.echo(arrows(f"{repo_id}: {compared.old_sha[:12]} -> {compared.new_sha[:12]}"))
    if analysis.libraries or analysis.old_libraries:
        libs = analysis.libraries if analysis.libraries == analysis.old_libraries else None
        click.echo(arrows(f"libraries: {', '.join(libs)}" if libs else
                          f"libraries: {', '.join(analysis.old_libraries) or '(none)'} -> "
                          f"{', '.join(analysis.libraries) or '(none)'}"))
    for line in format_findings(findings):
        click.echo(arrows(line))
    files = raw.files
    for label in ("added", "removed", "changed"):
        for item in files[label]:
            click.echo(f"{label:8} {escape_controls(item['path'])}")
    if not findings and not any(files.values()):
        click.echo("no changes")


@main.command()
@click.argument("repo_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_tracker
def events(tracker: Tracker, repo_id: str | None, as_json: bool) -> None:
    """Upstream surprises: history rewritten, renamed, deleted, re-created, gated, disabled."""
    rows = Revisions(tracker).events(parse_repo_id(repo_id) if repo_id else None)
    if as_json:
        emit_json([{"repo": e.repo_id, "kind": e.kind, "revision": e.revision_sha, "detail": e.detail,
                     "created_at": iso(e.created_at)} for e in rows])
        return
    if not rows:
        click.echo(f"no events for {repo_id}" if repo_id else "no events: no upstream surprises in any watched repo")
        return
    for e in rows:
        detail = escape_controls(json.dumps(e.detail, default=str, ensure_ascii=False))
        click.echo(f"{minute(e.created_at)}  {e.repo_id}  {e.kind}  {detail}")


# -- estimator ----------------------------------------------------------------------------------


@main.command()
@click.argument("target")
@click.option("--revision", default=None, help="For a repo: the revision (default: the branch head).")
@click.option("--seq-len", type=click.IntRange(min=1, max=1 << 30), default=None,
              help="Training/serving sequence length.")  # max: tracker.core.estimate.plausible.MAX_CONTEXT
@click.option("--lora-rank", type=click.IntRange(min=1, max=65_536), default=16, show_default=True,  # MAX_RANK
              help="LoRA adapter rank for the LoRA column (adapter memory and cost grow with it).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@fail_cleanly
def estimate(obj: Context, target: str, *, revision: str | None, seq_len: int | None, lora_rank: int,
             as_json: bool) -> None:
    """Parameters, GPU memory to fine-tune and serve, per card: TARGET is a repo id, a config.json or a folder."""
    from pathlib import Path

    from tracker.core.estimate import estimate as run_estimate
    from tracker.core.estimate import render_card

    path = Path(target).expanduser()
    headers = None
    if path.exists() or _looks_like_path(target):
        config = _local_config(path, target)
        if path.is_dir():
            headers = _local_headers(path)
    else:
        repo = parse_repo_id(target)
        config, headers = Revisions(obj.tracker()).estimate_inputs(repo, revision or "main", argument="--revision")
    if not isinstance(config, dict):
        raise click.BadParameter("config.json must hold a JSON object")
    result = run_estimate(config, seq_len=seq_len, lora_rank=lora_rank, checkpoint_headers=headers or None)
    if as_json:
        emit_json(result.to_json())
    else:
        click.echo(render_card(result))


def _looks_like_path(target: str) -> bool:
    """TARGET is meant as a file, not a repo id: it starts like a path or names a JSON file."""
    return target.startswith(("/", "./", "../", "~")) or target.endswith(".json") or target.count("/") > 1


def _local_config(path: Any, given: str) -> Any:
    """The config.json of a local file or folder, bounded like polling; one line when it cannot be read."""
    from tracker.core.findings.config import DEFAULT_MAX_BYTES, load_json_object

    config_path = path / "config.json" if path.is_dir() else path
    if not config_path.exists():
        raise click.BadParameter(f"no such file: {given if config_path == path else config_path}")
    if not config_path.is_file():  # a FIFO or a device would block or never end
        raise click.BadParameter(f"{config_path} is not a regular file: give a config.json or a model folder")
    try:  # bounded like polling: size, depth and element count; one line on failure
        with config_path.open("rb") as f:
            return load_json_object(f.read(DEFAULT_MAX_BYTES + 1))
    except OSError as exc:
        raise click.BadParameter(f"{config_path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise click.BadParameter(f"{config_path}: {exc}") from exc


def _local_headers(folder: Any) -> dict[str, Any]:
    """Safetensors headers of the files in a local folder (the header only, never the weights)."""
    from tracker.core.bounded import loads_json

    headers = {}
    for file in sorted(folder.glob("*.safetensors")):
        with file.open("rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if 0 < length <= 100 * 1024 * 1024:
                try:
                    headers[file.name] = loads_json(f.read(length))
                except ValueError:
                    continue
    return headers

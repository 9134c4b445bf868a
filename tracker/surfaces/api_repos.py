"""The API's reads beyond OSV: repos, rules, revisions, diffs and estimates.

``GET /v1/repos``, ``GET /v1/rules`` (the watch rules and their repos), ``GET /v1/repos/{owner}/{name}/revisions``,
``.../diff?from=&to=``, ``.../estimate?revision=``. A repo that is not watched is read from the Hub and nothing is
stored (its revisions are then its newest commits, not analysed). The API's other parts beside this one:
``api_ops.py`` (``/readyz``, ``/metrics``), ``api_writes.py`` (the token-guarded writes), ``api_guards.py``
(reads that need a token, the Host names answered), ``api_models.py`` (the request and response models).
Each route parses, calls a service (:mod:`tracker.services`) and shapes the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from tracker.core.model import RepoId, RevisionRow, validate_repo_id
from tracker.services import Revisions, RuleWithRepos, Watching
from tracker.services.revisions import checked_revision
from tracker.surfaces.api_deps import HubSlotDep, TrackerDep
from tracker.surfaces.api_errors import BadRequest
from tracker.surfaces.api_models import (
    ERRORS,
    DiffOut,
    RepoOut,
    ReposOut,
    RevisionOut,
    RevisionsOut,
    RuleOut,
    RuleRepoOut,
    RulesOut,
    TopFinding,
)

__all__ = ["MAX_UPSTREAM_COMMITS", "NAME", "repo_of", "repos_router"]

NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"  # a repo id part as the Hub allows it (checked fully below)
MAX_UPSTREAM_COMMITS = 1000


# -- helpers ------------------------------------------------------------------------------------------


def repo_of(owner: str, name: str) -> RepoId:
    try:
        return validate_repo_id(f"{owner}/{name}")
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


def _revision_out(rev: RevisionRow) -> RevisionOut:
    findings = rev.findings or ()
    return RevisionOut(
        sha=rev.sha, date=rev.date, title=rev.title, status=rev.status, baseline=rev.baseline,
        parent=rev.parent_sha, summary=rev.summary, worst_severity=rev.worst_severity, findings=len(findings),
        top_findings=[TopFinding(code=f.code, severity=f.severity.value, summary=f.summary) for f in findings[:3]],
        files={k: [e["path"] for e in v] for k, v in rev.diff.files.items()} if rev.diff is not None else {},
        libraries=list(rev.libraries),
    )


# -- the routers ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RepoPath:
    """The ``{owner}/{name}`` of a route's path; checked as a repo id when the route asks for it."""

    owner: str
    name: str

    def repo_id(self) -> RepoId:
        return repo_of(self.owner, self.name)


async def _repo_path(owner: Annotated[str, Path(pattern=NAME, max_length=96)],
                     name: Annotated[str, Path(pattern=NAME, max_length=96)]) -> RepoPath:
    return RepoPath(owner, name)


@dataclass(frozen=True)
class EstimateKnobs:
    seq_len: int | None
    lora_rank: int


async def _estimate_knobs(
    seq_len: Annotated[int | None, Query(ge=1, le=1 << 30, description="sequence length")] = None,
    lora_rank: Annotated[int, Query(ge=1, le=65_536)] = 16,
) -> EstimateKnobs:
    return EstimateKnobs(seq_len, lora_rank)


RepoPathDep = Annotated[RepoPath, Depends(_repo_path)]

# Plain `def` handlers: FastAPI runs them in its threadpool, off the event loop.
repos_router = APIRouter(tags=["repos"])


@repos_router.get("/v1/repos", response_model=ReposOut, responses={503: ERRORS[503]})
def list_repos(tracker: TrackerDep) -> ReposOut:
    """The watched repos, by id."""
    return ReposOut(repos=[
        RepoOut(repo=r.repo_id, branch=r.branch, state=r.state.value, every_seconds=r.every_seconds,
                last_seen_sha=r.last_seen_sha, last_polled_at=r.last_polled_at, last_error=r.last_error,
                renamed_to=r.renamed_to)
        for r in Watching(tracker).repos()
    ])


@repos_router.get("/v1/rules", response_model=RulesOut, responses={503: ERRORS[503]})
def list_rules(tracker: TrackerDep) -> RulesOut:
    """The watch rules (``tracker watch add --rule``), with the repos each one watches."""
    return RulesOut(rules=[_rule_out(held) for held in Watching(tracker).rules_with_repos()])


def _rule_out(held: RuleWithRepos) -> RuleOut:
    r = held.rule
    return RuleOut(id=r.id, rule=r.text, max=r.max_repos, grace_seconds=r.grace_seconds, created_at=r.created_at,
                   evaluated_at=r.evaluated_at, matched=r.matched, capped=r.capped, last_error=r.last_error,
                   repos=[RuleRepoOut(repo=repo, missing_since=since) for repo, since in held.repos])


@repos_router.get("/v1/repos/{owner}/{name}/revisions", response_model=RevisionsOut, responses=ERRORS)
def list_revisions(
    tracker: TrackerDep, slot: HubSlotDep, path: RepoPathDep,
    branch: Annotated[str, Query(min_length=1, max_length=200,
                                 description="for a repo not watched: the branch to list")] = "main",
    limit: Annotated[int, Query(ge=1, le=MAX_UPSTREAM_COMMITS,
                                description="for a repo not watched: how many of its newest commits")] = 100,
) -> RevisionsOut:
    """The revisions read, oldest first, with what changed in each; for a repo not watched, its newest
    commits on the Hub (nothing analysed or stored)."""
    repo_id = path.repo_id()
    revisions = Revisions(tracker)
    if Watching(tracker).get(repo_id) is None:
        branch = checked_revision(branch, "branch")
        with slot():
            listing = revisions.listing(repo_id, branch=branch, limit=limit)
    else:
        listing = revisions.listing(repo_id)
    if listing.repo is not None:
        return RevisionsOut(repo=repo_id, watched=True, revisions=[_revision_out(r) for r in listing.revisions])
    return RevisionsOut(repo=repo_id, watched=False, revisions=[
        RevisionOut(sha=c.sha, date=c.date, title=c.title, status="not_read", baseline=False,
                    parent=c.parents[0] if c.parents else None, summary=None, worst_severity=None,
                    findings=None, top_findings=[], files={})
        for c in listing.commits
    ])


@repos_router.get("/v1/repos/{owner}/{name}/diff", response_model=DiffOut, response_model_by_alias=True,
                  responses=ERRORS)
def diff(tracker: TrackerDep, slot: HubSlotDep, path: RepoPathDep,
         from_: Annotated[str, Query(alias="from", max_length=255, description="the older revision")],
         to: Annotated[str, Query(max_length=255, description="the newer revision")]) -> DiffOut:
    """What changed between two revisions of any repo: stored when watched and read, else read from the Hub."""
    repo_id = path.repo_id()
    old, new = checked_revision(from_, "from"), checked_revision(to, "to")
    with slot():
        compared = Revisions(tracker).compare(repo_id, old, new)
    return DiffOut.model_validate({"repo": repo_id, **compared.analysis.diff_json(compared.old_sha, compared.new_sha)})


@repos_router.get("/v1/repos/{owner}/{name}/estimate", response_model=dict[str, Any], responses=ERRORS)
def estimate(tracker: TrackerDep, slot: HubSlotDep, path: RepoPathDep,
             knobs: Annotated[EstimateKnobs, Depends(_estimate_knobs)],
             revision: Annotated[str, Query(max_length=255, description="a commit id, branch or tag")] = "main",
             ) -> dict[str, Any]:
    """Parameters and GPU memory to fine-tune and serve, per card, at a revision of any repo."""
    from tracker.core.bounded import json_safe
    from tracker.core.estimate import estimate as run_estimate

    repo_id = path.repo_id()
    revision = checked_revision(revision, "revision")
    with slot():
        config, headers = Revisions(tracker).estimate_inputs(repo_id, revision)
    if not isinstance(config, dict):
        raise BadRequest(f"{repo_id}@{revision}: config.json does not hold a JSON object")
    result = run_estimate(config, seq_len=knobs.seq_len, lora_rank=knobs.lora_rank,
                          checkpoint_headers=headers or None)
    out: dict[str, Any] = json_safe(result.to_json())
    return out

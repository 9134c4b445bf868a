"""Per-revision budgets: range requests, parsed-header memory and CPU time, each with what it skipped.

Before: 16 replaced ``.onnx`` files whose model-level fields are 17 KiB each cost 512 range requests
per file and side (16,385 for one revision, 27 minutes of the daemon's resolver budget); GGUF headers
stayed cached whatever their size (8 headers of 1M tensors: 1.9 GB); nothing bounded analysis time;
and a ``MemoryError`` was swallowed by the processor. Now a revision spends at most ``[limits]
revision_requests`` range requests, keeps at most ``revision_header_bytes`` of parsed headers,
and stops starting work after ``revision_cpu``; what did not fit is ``analysis.budget_exceeded``
(high), and the revision completes. Requests are counted at the stand-in.
"""

from __future__ import annotations

import pytest

from tests.meaning.onnx_files import _varint, bert_onnx
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker

ONNX_FILES = 16


def onnx_flood(opset: int, mark: int, fields: int = 40, size: int = 24 * 1024) -> bytes:
    """A real model behind ``fields`` model-level ``metadata_props`` entries of ``size`` bytes each (one range
    request each: too far apart for the reader's window to grow); ``mark`` makes each file's content its own."""
    entry = b"\x0a" + _varint(size - 8) + bytes([65 + mark]) * (size - 8)  # StringStringEntryProto.key
    return (b"\x72" + _varint(len(entry)) + entry) * fields + bert_onnx(opset=opset)  # ModelProto field 14


def range_reads(hub_standin) -> list[str]:
    return [r.path for r in hub_standin.requests if r.range and "/resolve/" in r.path]


@pytest.fixture
def tracker(hub_standin, tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path}/tracker.sqlite3", hub_endpoint=hub_standin.url,
                        hub_timeout=60.0)
    with make_tracker(settings, hub=HubClient(settings.hub_endpoint, timeout=60.0, sleep=lambda _s: None)) as t:
        yield t


def poll(tracker, repo: str, sha: str):
    """The stored revision ``sha`` of ``repo`` after one poll (which must not fail)."""
    (result,) = tracker.poll([repo])
    assert (result.status, result.error) in (("baseline", None), ("new", None)), result
    return tracker.store.revisions.get(tracker.store.repos.get(repo).pk, sha)


def test_sixteen_onnx_floods_spend_the_request_budget_and_say_what_was_skipped(hub_standin, tracker):
    repo = "acme/onnx-flood"
    hub_standin.create_repo(repo)
    names = [f"onnx/model_{i:02}.onnx" for i in range(ONNX_FILES)]
    first = hub_standin.commit(repo, {name: onnx_flood(14, i) for i, name in enumerate(names)}, lfs=set())
    tracker.store.repos.add(repo, now=tracker.clock())
    poll(tracker, repo, first)
    new = hub_standin.commit(repo, {name: onnx_flood(17, i) for i, name in enumerate(names)}, lfs=set(), message="opset 17")
    hub_standin.clear_log()

    row = poll(tracker, repo, new)

    assert len(range_reads(hub_standin)) == 200  # [limits] revision_requests; 16,384 before
    budget = [f for f in row.findings if f["code"] == "analysis.budget_exceeded"]
    skipped = [f"range reads of onnx/model_{i}.onnx" for i in range(12, 16)]
    assert [(f["severity"], f["summary"]) for f in budget] == [
        ("high", "the revision's budget of 200 range requests ([limits] revision_requests) is spent: 4 skipped "
                 f"({'; '.join(skipped[:3])}; and 1 more)")]
    assert (budget[0]["evidence"]["skipped"], budget[0]["evidence"]["requests_spent"]) == (skipped, 200)
    # the files read before the budget ran out are compared; the rest say why they were not
    by_code = {}
    for f in row.findings:
        by_code.setdefault(f["code"], []).append(f["summary"])
    assert by_code["exports.onnx_opset_changed"] == [
        f"onnx/model_{i:02}.onnx: opset ai.onnx 14 → 17" for i in range(12)]
    assert by_code["exports.onnx_not_read"] == [
        f"onnx/model_{i}.onnx changed and was not compared: the revision's budget of 200 range requests "
        "([limits] revision_requests) is spent" for i in range(12, 16)]

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

import json

import pytest

from tests.hostile.content_support import MiB, run_python
from tests.meaning.onnx_files import _varint, bert_onnx
from tests.meaning.test_sentencepiece import PIECES
from tests.meaning.test_sentencepiece import model as spiece_model
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.errors import BudgetExceeded
from tracker.core.findings import sentencepiece
from tracker.pipeline.sources import HeaderCache, RevisionBudget

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
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 60.0})
    with make_tracker(settings, hub=HubClient(settings.hub.endpoint, timeout=60.0,
                                              sleep=lambda _s: None)) as t:
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
    budget = [f for f in row.findings if f.code == "analysis.budget_exceeded"]
    skipped = [f"range reads of onnx/model_{i}.onnx" for i in range(12, 16)]
    assert [(f.severity.value, f.summary) for f in budget] == [
        ("high", "the revision's budget of 200 range requests ([limits] revision_requests) ran out: 4 skipped "
                 f"({'; '.join(skipped[:3])}; and 1 more)")]
    assert (budget[0].evidence["skipped"], budget[0].evidence["requests_spent"]) == (skipped, 200)
    # the files read before the budget ran out are compared; the rest say why they were not
    by_code = {}
    for f in row.findings:
        by_code.setdefault(f.code, []).append(f.summary)
    assert by_code["exports.onnx_opset_changed"] == [
        f"onnx/model_{i:02}.onnx: opset ai.onnx 14 → 17" for i in range(12)]
    assert by_code["exports.onnx_not_read"] == [
        f"onnx/model_{i}.onnx changed and was not compared: the revision's budget of 200 range requests "
        "([limits] revision_requests) is spent" for i in range(12, 16)]


# ---------------------------------------------------------------------------- parsed-header memory

GGUF_FILES = 8
GGUF_TENSORS = 100_000  # a 5.7 MB header that parses to about 41 MB
HEADROOM = 224 * MiB  # address space the child may map once warm: the 8 parsed headers (330 MB) cannot fit

CHILD = """
    import json, resource, sys
    from pathlib import Path
    from tests.hostile.content_support import peak_mb
    from tracker.adapters.hub import HubClient
    from tracker.adapters.settings import Settings
    from tracker.app import make_tracker

    url, db, header_bytes, headroom = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    def vm_size():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    settings = Settings(database={"url": db}, hub={"endpoint": url, "timeout": 60.0},
                        limits={"revision_header_bytes": header_bytes})
    with make_tracker(settings, hub=HubClient(url, timeout=60.0, sleep=lambda _s: None)) as tracker:
        for repo in ("acme/warm", "acme/ggufs", "acme/after"):
            tracker.store.repos.add(repo, now=tracker.clock())
        tracker.poll(["acme/warm"])  # imports, pools and caches of a GGUF poll, before the cap
        before = peak_mb()
        resource.setrlimit(resource.RLIMIT_AS, (vm_size() + headroom, resource.getrlimit(resource.RLIMIT_AS)[1]))
        results = tracker.poll(["acme/ggufs", "acme/after"])
        rows = {}
        for repo in ("acme/ggufs", "acme/after"):
            pk = tracker.store.repos.get(repo).pk
            rows[repo] = [(f.code, f.severity.value, f.summary) for row in
                          tracker.store.revisions.of_repo(pk) for f in row.findings or ()
                          if f.code.startswith(("analysis.", "gguf.architecture"))]
        print(json.dumps({"results": [[r.repo, r.status, r.error] for r in results], "rows": rows,
                          "growth_mb": peak_mb() - before}))
"""


@pytest.fixture(scope="module")
def gguf_hub(tmp_path_factory):
    """A stand-in with ``acme/ggufs``: 8 GGUF files of 100,000 tensors each (distinct contents), a small
    ``acme/warm`` and ``acme/after`` (polled after ``acme/ggufs`` in the same cycle)."""
    from hubstandin import HubStandin

    from tests.meaning.gguf_files import write_gguf

    root = tmp_path_factory.mktemp("gguf-budget")
    small = write_gguf(root / "small.gguf").read_bytes()
    big = write_gguf(root / "big.gguf", tensors={f"blk.{i}.ffn_norm.weight": (8,) for i in range(GGUF_TENSORS)})
    data = big.read_bytes()
    files = {f"q{k}.gguf": data.replace(b"blk.0.ffn_norm", b"blk.0.ff" + bytes([65 + k]) + b"_norm", 1)
             for k in range(GGUF_FILES)}
    assert len(set(files.values())) == GGUF_FILES
    hub = HubStandin(root / "hub").start()
    for repo, content in (("acme/warm", {"small.gguf": small}), ("acme/ggufs", files),
                          ("acme/after", {"README.md": b"# after\n", "small.gguf": small})):
        hub.create_repo(repo)
        hub.commit(repo, content)
    try:
        yield hub
    finally:
        hub.stop(wait=False)


def poll_ggufs_in_child(hub, tmp_path, header_bytes: int) -> dict:
    done = run_python(CHILD.replace("sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])",
                                    f"{hub.url!r}, {f'sqlite:///{tmp_path}/t.sqlite3'!r}, {header_bytes}, {HEADROOM}"),
                      memory=16 * 1024 * MiB, timeout=600)
    return done.result()


def test_parsed_gguf_headers_are_evicted_by_size_and_the_poll_fits_in_its_headroom(gguf_hub, tmp_path):
    out = poll_ggufs_in_child(gguf_hub, tmp_path, 64 * MiB)
    assert out["results"] == [["acme/ggufs", "baseline", None], ["acme/after", "baseline", None]]
    assert out["rows"]["acme/ggufs"] == []  # nothing skipped, nothing failed
    assert out["growth_mb"] < 160, out  # about 105 measured; every header kept would be 330


def test_a_memory_error_completes_the_revision_and_the_cycle_goes_on(gguf_hub, tmp_path):
    out = poll_ggufs_in_child(gguf_hub, tmp_path, 4096 * MiB)  # every header kept: the cap is reached
    assert out["results"] == [["acme/ggufs", "baseline", None], ["acme/after", "baseline", None]]
    assert out["rows"]["acme/ggufs"] == [
        ["analysis.failed", "moderate", "analysis failed: MemoryError: the revision's content did not fit in memory; "
         "nothing of it was analysed"]]
    assert out["rows"]["acme/after"] == []


# ---------------------------------------------------------------------------- CPU time, and parsing once

TOKENIZER_FOLDERS = ["tokenizer", *(f"tokenizer_{k}" for k in range(2, 7))]


def diffusers_pipeline(spiece: bytes) -> dict[str, bytes]:
    """A pipeline whose six tokenizer folders share one ``spiece.model`` (T5 tokenizers, no tokenizer.json)."""
    index = {"_class_name": "StableDiffusion3Pipeline", **{f: ["transformers", "T5Tokenizer"] for f in TOKENIZER_FOLDERS}}
    return {"model_index.json": json.dumps(index).encode(), **{f"{f}/spiece.model": spiece for f in TOKENIZER_FOLDERS}}


def tracker_with(hub_standin, tmp_path, **settings):
    config = Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                      hub={"endpoint": hub_standin.url, "timeout": 60.0}).changed(**settings)
    return make_tracker(config, hub=HubClient(config.hub.endpoint, timeout=60.0, sleep=lambda _s: None))


def two_revisions(hub_standin, tracker, repo: str, before: dict, after: dict):
    """``before`` polled as the baseline, then ``after``: the stored row of ``after``."""
    hub_standin.create_repo(repo)
    first = hub_standin.commit(repo, before)
    tracker.store.repos.add(repo, now=tracker.clock())
    poll(tracker, repo, first)
    return poll(tracker, repo, hub_standin.commit(repo, after, message="swap pieces"))


def test_one_spiece_model_shared_by_six_tokenizer_folders_is_parsed_once_per_side(hub_standin, tmp_path):
    swapped = [*PIECES[:4], "▁a", "s", "▁the", "▁of"]
    with tracker_with(hub_standin, tmp_path) as tracker:
        sentencepiece.parsed_once.cache_clear()
        row = two_revisions(hub_standin, tracker, "acme/sd3", diffusers_pipeline(spiece_model()),
                            diffusers_pipeline(spiece_model(swapped)))
    assert sentencepiece.parsed_once.cache_info().misses == 2  # the old and the new model, once each
    assert sorted({f.path for f in row.findings if f.code.startswith("tokenizer.")}) == [
        f"{folder}/spiece.model" for folder in TOKENIZER_FOLDERS]
    assert [f.code for f in row.findings if f.code.startswith("analysis.")] == []


def test_past_the_cpu_budget_nothing_more_is_started_and_the_revision_completes(hub_standin, tmp_path):
    with tracker_with(hub_standin, tmp_path, limits={"revision_cpu": 1e-6}) as tracker:
        row = two_revisions(hub_standin, tracker, "acme/sd3-slow", diffusers_pipeline(spiece_model()),
                            diffusers_pipeline(spiece_model(PIECES[::-1])))
    [finding] = row.findings  # the diff was made; no analysis was started after it
    assert (finding.code, finding.severity.value, finding.summary) == (
        "analysis.budget_exceeded", "high", "the revision's budget of 1e-06 s of CPU time ([limits] revision_cpu) ran "
        "out: 17 skipped (the files analysis; the config analysis; the generation analysis; and 14 more)")
    assert finding.evidence["skipped"][-3:] == ["the diffusers analysis", "the exports analysis", "the estimate"]


def test_a_header_over_the_memory_budget_is_skipped_and_named(hub_standin, tmp_path):
    from tests.meaning.gguf_files import write_gguf

    small = write_gguf(tmp_path / "small.gguf").read_bytes()
    with tracker_with(hub_standin, tmp_path,
                      limits={"revision_header_bytes": 8192}) as tracker:  # 1 KiB of GGUF header
        row = two_revisions(hub_standin, tracker, "acme/gguf-small-budget", {"README.md": b"# q\n"},
                            {"README.md": b"# q\n", "q4.gguf": small})
    assert [(f.code, f.severity.value, f.summary) for f in row.findings if f.category == "analysis"] == [
        ("analysis.budget_exceeded", "high", "the revision's budget of 8,192 bytes of parsed headers ([limits] "
         "revision_header_bytes) ran out: 1 skipped (the GGUF header of q4.gguf (string of 390 bytes at offset 892 "
         "runs past the 1,024-byte cap))")]


# ---------------------------------------------------------------------------- the pieces themselves


def test_the_header_cache_evicts_the_least_recently_used_by_size():
    cache = HeaderCache(100)
    cache.put("a", "A", 40, "gguf")
    cache.put("b", "B", 40, "gguf")
    assert cache.get("a") == "A"  # now the most recently used
    cache.put("c", "C", 40, "onnx")  # 120 > 100: b goes, not a
    assert ("a" in cache, "b" in cache, "c" in cache, cache.used) == (True, False, True, 80)
    cache.put("huge", "H", 101, "gguf")  # over the whole limit: returned to its caller, never kept
    assert ("huge" in cache, cache.used, cache.parses) == (False, 80, {"gguf": 3, "onnx": 1})


def test_the_request_budget_counts_each_read_and_names_what_it_refused():
    budget = RevisionBudget(requests=2)
    budget.spend_request("range reads of a.onnx")
    budget.spend_request("range reads of a.onnx")
    for path in ("a.onnx", "b.onnx", "b.onnx"):
        with pytest.raises(BudgetExceeded, match=rf"^the revision's requests budget is spent; range reads of {path} "):
            budget.spend_request(f"range reads of {path}")
    assert (budget.spent_requests, budget.requests_left) == (2, 0)
    assert (budget.skipped, budget.skipped_count) == ({"requests": ["range reads of a.onnx", "range reads of b.onnx"]},
                                                      {"requests": 2})

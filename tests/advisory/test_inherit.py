"""The pure part of inherited fixes (tracker/core/inherit.py): which values a base changed, which a derivative still has."""

from __future__ import annotations

from datetime import UTC, datetime

from tracker.core.advisory import inherited_id, validate
from tracker.core.advisory.reach import ReachIndex, Span, events_of, spans_for
from tracker.core.advisory.record import Advisory, parse_advisory
from tracker.core.inherit import ABSENT, Contents, base_change, closures, digest, inherited_write, stale_items
from tracker.core.model import AdvisoryRow, RepoId, Severity
from tracker.core.report import AdvisoryContext

BASE, DERIVED = RepoId("acme/base"), RepoId("acme/derived")
B0, B1, D0, D1 = "b0" * 20, "b1" * 20, "d0" * 20, "d1" * 20
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BASE_ADV = "x_HFUT-aaaa-bbbb-cccc"


def update_record(*paths: str, severity: str = "high", kind: str = "update") -> Advisory:
    return parse_advisory({"id": BASE_ADV, "modified": "2026-01-01T00:00:00Z", "database_specific": {
        "kind": kind, "repo_id": BASE, "revision": B1, "parent": B0,
        "findings": [{"code": f"x.{p}", "category": p.split(".")[0], "severity": severity, "path": p,
                      "summary": "changed"} for p in paths]}})


def contents(sha: str, **files: dict | str) -> Contents:
    """``name=obj`` (a JSON file, its content id derived from it) or ``name="id"`` (any file by content id)."""
    ids, objs = {}, {}
    for name, value in files.items():
        path = name.replace("__", ".")
        if isinstance(value, dict):
            ids[path], objs[path] = digest(value)[7:47], value
        else:
            ids[path] = value
    return Contents(sha=sha, files=ids, json=objs)


def write_for(change, content, existing=frozenset()):
    return inherited_write(change, repo_id=DERIVED, content=content, existing=existing,
                           endpoint="https://hub.example", tracker_url=None, now=NOW)


def affected(record: dict, graph: list[tuple[str, list[str]]]) -> list[Span]:
    """What a record's range affects in ``graph``: the spans the store would index."""
    index = ReachIndex()
    index.add(graph)
    return spans_for(index, events_of(record))


def test_only_the_keys_the_base_changed_count_and_bookkeeping_keys_never():
    before = contents(B0, generation_config__json={"eos_token_id": 1, "top_p": 0.9, "transformers_version": "4.40"})
    after = contents(B1, generation_config__json={"eos_token_id": [1, 9], "top_p": 0.9, "temperature": 0.6,
                                                  "transformers_version": "4.44"})
    change = base_change(update_record("generation_config.json", "README.md"), before, after)
    assert change is not None and change.compared_with == B0
    assert [(i.path, i.key, i.before_digest == ABSENT) for i in change.items] == [
        ("generation_config.json", "eos_token_id", False), ("generation_config.json", "temperature", True)]
    # Still the old eos and no temperature: both, so the summary says "the old values".
    derived = contents(D0, generation_config__json={"eos_token_id": 1, "top_p": 0.5})
    assert [(s["key"], s.get("value", "absent")) for s in stale_items(change, derived)] == [
        ("eos_token_id", 1), ("temperature", "absent")]
    write = write_for(change, derived)
    assert write is not None
    validate(write.record)
    assert write.record["summary"] == f"base acme/base fixed eos_token_id, temperature at {B1[:12]}; this repo still " \
                                      "has the old values"
    assert write.id == inherited_id(DERIVED, BASE_ADV)
    assert (write.kind, write.severity, write.revision_sha) == ("inherited", "high", D0)
    assert affected(write.record, [(D0, [])]) == [Span(1, 0, 2**31 - 1)]  # the whole derivative, as it grows
    # Only the temperature missing: "lacks it"; the new values already: nothing; its own value: nothing.
    lacking = write_for(change, contents(D0, generation_config__json={"eos_token_id": [1, 9]}))
    assert lacking is not None
    assert lacking.record["summary"] == f"base acme/base fixed temperature at {B1[:12]}; this repo still lacks it"
    assert write_for(change, contents(D0, generation_config__json={"eos_token_id": [1, 9], "temperature": 0.6})) is None
    assert write_for(change, contents(D0, generation_config__json={"eos_token_id": 2, "temperature": 1.0})) is None
    # No such file in the derivative, or an advisory it already has: nothing.
    assert write_for(change, contents(D0, config__json={"eos_token_id": 1})) is None
    assert write_for(change, derived, existing=frozenset({write.id})) is None


def test_a_change_outside_inheritable_files_or_a_risk_is_no_base_change():
    before, after = contents(B0, README__md="r0"), contents(B1, README__md="r1")
    assert base_change(update_record("README.md"), before, after) is None
    risk = update_record("generation_config.json", kind="risk")
    assert base_change(risk, contents(B0, generation_config__json={"a": 1}),
                       contents(B1, generation_config__json={"a": 2})) is None


def test_large_values_are_recorded_as_a_preview_and_a_digest():
    template_old, template_new = "{{ messages }}" * 100, "{{ messages }}<|end|>" * 100
    change = base_change(update_record("tokenizer_config.json"),
                         contents(B0, tokenizer_config__json={"chat_template": template_old}),
                         contents(B1, tokenizer_config__json={"chat_template": template_new}))
    assert change is not None
    (item,) = stale_items(change, contents(D0, tokenizer_config__json={"chat_template": template_old}))
    assert item["key"] == "chat_template"
    assert item["value"] == {"truncated": ('"' + template_old)[:200] + "…", "digest": digest(template_old)}
    assert item["before_digest"] == digest(template_old) and item["after_digest"] == digest(template_new)


def test_closed_only_when_no_item_keeps_its_old_value():
    change = base_change(update_record("generation_config.json"),
                         contents(B0, generation_config__json={"eos_token_id": 1, "pad_token_id": 0}),
                         contents(B1, generation_config__json={"eos_token_id": 9, "pad_token_id": 2}))
    write = write_for(change, contents(D0, generation_config__json={"eos_token_id": 1, "pad_token_id": 0}))
    assert write is not None
    row = AdvisoryRow(id=write.id, repo_id=DERIVED, revision_sha=D0, kind="inherited", severity="high",
                      record=write.advisory, published=NOW, modified=NOW, withdrawn=False, fixed_sha=None,
                      osv=write.record)
    graph = [(D0, []), (D1, [D0])]
    index = ReachIndex()
    index.add(graph)
    ctx = AdvisoryContext(repo_id=DERIVED, endpoint="https://hub.example", tracker_url=None,
                          min_severity=Severity.LOW, advisories=[row], now=NOW, reach=index)

    def closed(**files):
        return closures(ctx, sha=D1, content=contents(D1, **files))

    assert closed(generation_config__json={"eos_token_id": 9, "pad_token_id": 0}) == []  # half the fix
    (fixed,) = closed(generation_config__json={"eos_token_id": 9, "pad_token_id": 5})
    validate(fixed.record)
    assert fixed.fixed_sha == D1
    assert affected(fixed.record, graph) == [Span(1, 0, 0)]  # D0 only
    assert fixed.record["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": D1}]
    (gone,) = closed(config__json={})  # the file itself is gone: it no longer carries the old values
    assert gone.fixed_sha == D1

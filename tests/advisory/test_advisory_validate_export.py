"""Strict validation (NOTES.md §1.7 negative table) and the offline export layout."""

from __future__ import annotations

import copy
import io
import json
import zipfile

import pytest

from tests.advisory.support import ENDPOINT, T1, T2, checked, sha
from tests.shared import OSV_EXAMPLES
from tracker.core.advisory.build import repo_event_advisory
from tracker.core.advisory.export import build_all_zip, export_files
from tracker.core.advisory.validate import AdvisoryValidationError, validate

EXAMPLES = OSV_EXAMPLES
GOOD = {
    "id": "x_HFUT-2026-0001",
    "modified": "2026-08-21T10:15:00Z",
    "affected": [{"ranges": [{"type": "GIT", "repo": "https://huggingface.co/o/m",
                              "events": [{"introduced": sha(1)}], "database_specific": {"ref": "main"}}],
                  "database_specific": {"anything": {"nested": [1]}}}],
    "database_specific": {"free": {"form": True}},
}


def mutate(path, value):
    record = copy.deepcopy(GOOD)
    target = record
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return record


def test_good_record_and_shared_examples_validate():
    validate(GOOD)
    examples = sorted(EXAMPLES.glob("*.json"))
    if not examples:
        pytest.skip(f"shared examples not found at {EXAMPLES}")
    for path in examples:
        validate(json.loads(path.read_text()))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (mutate(["id"], "HFUT-2026-0001"), "id: 'HFUT-2026-0001' does not match"),
        (mutate(["modified"], "2026-08-21T10:15:00+00:00"), "modified:"),
        (mutate(["modified"], KeyError), "'modified' is a required property"),
        (mutate(["modified"], "2026-02-30T10:15:00Z"), "modified: '2026-02-30T10:15:00Z' is not a 'date-time'"),
        (mutate(["references"], [{"type": "WEB", "url": "not a uri"}]), "references.0.url: 'not a uri' is not a 'uri'"),
        (mutate(["unknown"], 1), "Additional properties are not allowed"),
        (mutate(["affected", 0, "ranges", 0, "events"], [{"introduced": sha(1)[:12]}]), "affected.0.ranges.0.events.0"),
        (mutate(["affected", 0, "ranges", 0, "events"], [{"fixed": sha(1)}]), "events"),
        (mutate(["affected", 0, "ranges", 0, "events"], [{"introduced": "0", "fixed": sha(1)}]), "events.0"),
        (mutate(["affected", 0, "ranges", 0, "events"], [{"introduced": "0"}, {"limit": "*"}]), "events.1"),
        (mutate(["affected", 0, "ranges", 0, "repo"], KeyError), "'repo' is a required property"),
        (mutate(["affected", 0, "ranges", 0, "type"], "HF_REVISION"), "affected.0.ranges.0.type"),
        (mutate(["affected", 0, "package"], {"ecosystem": "Hugging Face", "name": "o/m"}), "ecosystem"),
        (mutate(["references"], [{"type": "COMMIT", "url": "https://x"}]), "references.0.type"),
        (mutate(["severity"], [{"type": "HF", "score": "high"}]), "severity.0"),
    ],
)
def test_schema_rejections(record, message):
    with pytest.raises(AdvisoryValidationError) as info:
        validate(record)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("path", "where"),
    [
        (["affected", 0, "kind"], "affected[0].kind: unknown field"),
        (["affected", 0, "ranges", 0, "ref"], "affected[0].ranges[0].ref: unknown field"),
        (["affected", 0, "ranges", 0, "events", 0, "note"], "affected[0].ranges[0].events[0].note: unknown field"),
    ],
)
def test_nested_unknown_keys_are_rejected_as_protojson_would(path, where):
    record = mutate(path, "x")
    with pytest.raises(AdvisoryValidationError) as info:
        validate(record)
    assert where in str(info.value)
    assert info.value.record_id == "x_HFUT-2026-0001"


def _records():
    a = checked(repo_event_advisory(repo_id="o/m", kind="deleted", detail={}, revisions=[sha(1)],
                                    endpoint=ENDPOINT, now=T1))
    b = checked(repo_event_advisory(repo_id="o/m", kind="gated", detail={}, revisions=[sha(2)],
                                    endpoint=ENDPOINT, now=T1))
    b_newer = checked(repo_event_advisory(repo_id="o/m", kind="gated", detail={"note": "again"}, revisions=[sha(2)],
                                          endpoint=ENDPOINT, now=T2, previous=b))
    return a, b, b_newer


def test_export_files_latest_per_id_and_deterministic():
    a, b, b_newer = _records()
    files = export_files([a, b_newer, b])
    assert list(files) == sorted([f"{a['id']}.json", f"{b['id']}.json"])
    assert json.loads(files[f"{b['id']}.json"]) == b_newer
    assert files[f"{a['id']}.json"].endswith(b"}\n")
    assert export_files([b, a, b_newer]) == files


def test_all_zip_holds_the_same_files_at_its_root():
    a, b, b_newer = _records()
    data = build_all_zip([a, b, b_newer])
    assert data == build_all_zip([b_newer, a, b])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.namelist() == list(export_files([a, b_newer]))
        for name, content in export_files([a, b_newer]).items():
            assert archive.read(name) == content
        assert archive.getinfo(f"{a['id']}.json").date_time == (2026, 8, 21, 10, 15, 0)


def test_export_refuses_invalid_records():
    with pytest.raises(AdvisoryValidationError):
        export_files([mutate(["affected", 0, "kind"], "x")])
    with pytest.raises(ValueError, match="not safe as a file name"):
        export_files([mutate(["id"], "x_../../etc")])

"""The file inventory: one finding per added, removed, changed or renamed file; nothing skipped."""

from __future__ import annotations

from tests.findings.sources import make_change
from tests.findings.weights_sources import WeightsSources, change, lfs, small
from tracker.core.findings import files
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import FileEntry, Severity

RULES = SeverityRules.default()


def test_added_removed_changed_renamed_exactly():
    old = {"config.json": b'{"a": 1}', "README.md": b"# model\n", "old_name.txt": b"same bytes", "gone.py": b"x=1\n"}
    new = {"config.json": b'{"a": 2}', "README.md": b"# model\n", "new_name.txt": b"same bytes", "tokenizer.model": b"\x00" * 499_723}
    ch, src = make_change(old, new)
    found = files.analyse(ch, src, RULES)
    assert [(f.code, f.severity, f.summary) for f in found] == [
        ("files.renamed", Severity.MODERATE,
         "renamed old_name.txt → new_name.txt (10 bytes): hard-coded paths to the old name now 404"),
        ("files.added", Severity.INFO, "added tokenizer.model (499,723 bytes)"),
        ("files.removed", Severity.LOW, "removed gone.py (4 bytes)"),
        ("files.changed", Severity.INFO, "changed config.json (8 bytes → 8 bytes)"),
    ]
    renamed, added, removed, changed = found
    assert (renamed.path, renamed.before, renamed.after) == ("new_name.txt", "old_name.txt", "new_name.txt")
    assert added.evidence == {"size": 499_723, "storage": "git"}
    assert changed.before == ch.old.get("config.json").blob_id
    assert changed.after == ch.new.get("config.json").blob_id
    assert src.reads == []  # the inventory never reads content


def test_lfs_content_id_and_storage_moves():
    old = [lfs("model.safetensors", 100, "v1"), small("tokenizer.json", b"{}"), lfs("a.bin", 5, "same")]
    new = [lfs("model.safetensors", 100, "v2"), lfs("tokenizer.json", 2, "{}"), lfs("b.bin", 5, "same")]
    found = files.analyse(change(old, new), WeightsSources(), RULES)
    assert [(f.code, f.summary) for f in found] == [
        ("files.renamed", "renamed a.bin → b.bin (5 bytes): hard-coded paths to the old name now 404"),
        ("files.changed", "changed model.safetensors (100 bytes → 100 bytes)"),
        ("files.changed", "changed tokenizer.json (2 bytes → 2 bytes; now stored in LFS)"),
    ]
    assert found[1].before == old[0].lfs_sha256
    assert found[2].evidence == {"size_before": 2, "size_after": 2, "storage_before": "git", "storage_after": "lfs"}


def test_touched_file_with_same_content_is_not_changed():
    ch, src = make_change({"a.txt": b"x"}, {"a.txt": b"x"})
    assert files.analyse(ch, src, RULES) == []


def test_empty_files_are_not_paired_as_renames():
    ch, src = make_change({"a/__init__.py": b""}, {"b/__init__.py": b""})
    assert [f.summary for f in files.analyse(ch, src, RULES)] == [
        "added b/__init__.py (0 bytes)",
        "removed a/__init__.py (0 bytes)",
    ]


def test_two_copies_renamed_pair_in_path_order():
    ch, src = make_change({"a1": b"dup", "a2": b"dup"}, {"b1": b"dup", "b2": b"dup", "b3": b"dup"})
    assert [f.summary for f in files.analyse(ch, src, RULES)] == [
        "renamed a1 → b1 (3 bytes): hard-coded paths to the old name now 404",
        "renamed a2 → b2 (3 bytes): hard-coded paths to the old name now 404",
        "added b3 (3 bytes)",
    ]


def test_baseline_lists_every_file_once():
    ch = change(None, [lfs("model.safetensors", 90_868_376, "v1"), small("config.json", b"{}")])
    [f] = files.analyse(ch, WeightsSources(), RULES)
    assert (f.code, f.severity, f.path) == ("files.baseline", Severity.INFO, None)
    assert f.summary == "first tracked revision: 2 files, 90,868,378 bytes"
    assert f.evidence == {
        "files": {"config.json": 2, "model.safetensors": 90_868_376},
        "count": 2,
        "total_size": 90_868_378,
        "lfs_files": 1,
    }


def test_rename_by_xet_hash_and_renames_helper():
    """The same Xet hash is the same content, whatever the blob ids; renames() is what every analyser asks."""
    old = {"flux1-dev.sft": FileEntry("flux1-dev.sft", 100, "1" * 40, None, "f" * 64),
           "ae.sft": FileEntry("ae.sft", 7, "2" * 40, None, "e" * 64)}
    new = {"flux1-dev.safetensors": FileEntry("flux1-dev.safetensors", 100, "3" * 40, None, "f" * 64),
           "ae.safetensors": FileEntry("ae.safetensors", 7, "4" * 40, None, "d" * 64)}
    assert files.renames(old, new) == {"flux1-dev.sft": "flux1-dev.safetensors"}
    found = files.analyse(change(list(old.values()), list(new.values())), WeightsSources(), RULES)
    assert [(f.code, f.severity, f.path, f.before, f.after) for f in found] == [
        ("files.renamed", Severity.MODERATE, "flux1-dev.safetensors", "flux1-dev.sft", "flux1-dev.safetensors"),
        ("files.added", Severity.INFO, "ae.safetensors", None, "4" * 40),
        ("files.removed", Severity.LOW, "ae.sft", "2" * 40, None),
    ]

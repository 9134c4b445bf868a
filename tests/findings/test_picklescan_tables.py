"""picklescan's own tables reach the pickle classification: they are private there, so a rename must fail here."""

from __future__ import annotations

import pytest

from tracker.core.findings import weights


def test_picklescan_tables_are_read_and_hold_the_known_dangerous_globals() -> None:
    # The tables read from picklescan's private module: this file guards them against its upgrades.
    unsafe, safe = weights._PS_UNSAFE, weights._PS_SAFE  # noqa: SLF001
    assert len(unsafe) >= 50 and len(safe) >= 5
    for module in ("os", "posix", "nt", "subprocess", "sys", "socket", "runpy", "shutil", "pty", "webbrowser", "pickle"):
        assert unsafe[module] == "*", module
    assert {"eval", "exec", "compile", "open", "getattr"} <= unsafe["builtins"]
    assert {"attrgetter", "itemgetter", "methodcaller"} <= unsafe["operator"]
    assert {"_rebuild_tensor_v2"} <= safe["torch._utils"]
    assert all(names == "*" or (isinstance(names, frozenset) and all(isinstance(n, str) for n in names))
               for table in (unsafe, safe) for names in table.values())


@pytest.mark.parametrize(
    ("module", "name"),
    [  # in picklescan's list and not in the tracker's own: they are dangerous only through the merge
        ("torch._inductor.codecache", "compile_file"),
        ("doctest", "debug_script"),
        ("ensurepip", "_run_pip"),
        ("logging", "FileHandler"),
        ("_io", "FileIO"),
        ("torch.jit.unsupported_tensor_ops", "execWrapper"),
        ("numpy.f2py", "crackfortran"),
    ],
)
def test_a_global_only_picklescan_knows_is_dangerous(module: str, name: str) -> None:
    assert not weights._matches(weights._DANGEROUS, module, name, parents=True)  # noqa: SLF001 - the tracker's own list alone
    assert weights.classify_global(module, name) == "dangerous"


def test_a_lone_name_in_picklescans_table_is_one_name_not_a_substring() -> None:
    # picklescan writes {"torch._inductor.codecache": "compile_file"}: "file" is not in it.
    assert weights.classify_global("torch._inductor.codecache", "file") == "unknown"

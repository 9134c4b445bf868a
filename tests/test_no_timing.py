"""No test asserts how long something took: on a busy machine that fails for no fault (bench/ times things)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
NAMES = {"elapsed", "took", "latency", "started", "start"}  # what a test calls a clock reading
CLOCKS = {"monotonic", "perf_counter", "time", "now", "clock", "process_time"}


def _about_time(test: ast.expr) -> bool:
    """The assertion uses a clock reading taken earlier, or the difference of two."""
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and node.id in NAMES:
            return True
        if (isinstance(node, ast.Attribute) and node.attr == "seconds" and isinstance(node.value, ast.Name)) or (
                isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "seconds"):
            return True  # a measured run's seconds (a subprocess's report)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "clock":
            return True  # a stopwatch helper (a tracker's own clock is tracker.clock(), a datetime)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            for side in (node.left, node.right):
                if isinstance(side, ast.Call):
                    func = side.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    if name in CLOCKS:
                        return True
    return False


def test_no_assertion_is_about_elapsed_time() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text("utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Assert) and _about_time(node.test):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: {ast.get_source_segment(text, node)}"[:160])
    assert found == []

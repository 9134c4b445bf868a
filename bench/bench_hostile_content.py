"""Time and memory of the analysis on crafted upstream files (issue 9), each in a fresh process.

Run: python bench/bench_hostile_content.py   (prints seconds and peak MiB per case; each case
runs under RLIMIT_AS = 1 GiB, so one that blows up prints its error instead of a figure)

Targets: every case well under a few seconds and a few hundred MiB.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile.content_support import MiB, run_python

SETUP = """
import json, os, pickle, time
from tests.hostile.content_support import peak_mb
"""
CASES = {
    "config nested 100,000 deep: config analyser": """
        from tests.findings.sources import make_change
        from tracker.core.findings import config, rules
        deep = b'{"a":' * 100_000 + b'1' + b'}' * 100_000
        change, sources = make_change({"config.json": b'{}'}, {"config.json": deep})
        run = lambda: config.analyse(change, sources, rules.SeverityRules.default())
    """,
    "3 M keys (18 MB) config: raw diff": """
        from tracker.core.diff import diff_text
        big = b'{' + b'"k":1,' * 3_000_000 + b'"k":1}'
        run = lambda: diff_text("config.json", b'{}', big)
    """,
    "453-byte billion laughs README: raw diff + licence": """
        from tracker.core.diff import diff_text
        from tracker.core.findings import licence
        laughs = "a: &a [x, x, x, x, x, x, x, x, x]\\n" + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\\n" for p, c in zip("abcdefgh", "bcdefghi"))
        bomb = ("---\\n" + laughs + "---\\n").encode()
        run = lambda: (diff_text("README.md", b"", bomb), licence.front_matter(bomb))
    """,
    "num_hidden_layers 100,000,000: estimate": """
        from tracker.core.estimate import estimate
        cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 100_000_000,
               "num_attention_heads": 32, "intermediate_size": 11008, "vocab_size": 32000}
        run = lambda: estimate(cfg).to_json()
    """,
    "40 MB multi-line .py: text diff": """
        from tracker.core.diff import text_diff
        big = b"x = compute(1)  # padding padding padding padding\\n" * 800_000
        run = lambda: text_diff(b"x = 1\\n", big, "modeling.py")
    """,
    "10,000 swapped line pairs (difflib: ~4 s): text diff": """
        from tracker.core.diff import text_diff
        a = [f"line {i}" for i in range(20_000)]
        b = [x for i in range(0, 20_000, 2) for x in (a[i + 1], a[i])]
        old, new = "\\n".join(a[:10_000]), "\\n".join(b[:10_000])
        run = lambda: text_diff(old, new, "m.py")
    """,
    "dangerous data.pkl + 17 harmless members: scan": """
        from tests.hostile.content_support import dangerous_pickle, harmless_pickle, torch_like_zip
        from tracker.core.findings.picklescan_zip import scan_checkpoint
        data = torch_like_zip({"a/data.pkl": dangerous_pickle(), **{f"a/{i}.pkl": harmless_pickle(i) for i in range(17)}})
        run = lambda: scan_checkpoint(lambda o, n: data[o:o + n], len(data))
    """,
}


def main() -> int:
    print(f"{'case':<56}{'seconds':>9}{'peak MiB':>10}")
    for name, body in CASES.items():
        code = SETUP + textwrap.dedent(body) + (
            "\nstart = time.monotonic(); run(); took = time.monotonic() - start\n"
            "print(json.dumps({'seconds': took, 'peak': peak_mb()}))\n")
        done = run_python(code, memory=1024 * MiB, timeout=120)
        if done.returncode:
            print(f"{name:<56}  failed: {done.stderr.strip().splitlines()[-1]}")
            continue
        figures = done.result()
        print(f"{name:<56}{figures['seconds']:>9.3f}{figures['peak']:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

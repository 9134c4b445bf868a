"""Time one estimate (mean over many runs): rerunning it on every config change must cost nothing.

Run: python bench/bench_estimate.py   (prints figures; the target is < 10 ms per estimate)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracker.core.estimate import estimate

CONFIGS = [
    ROOT / "tests" / "fixtures" / "configs" / "intfloat__multilingual-e5-large.json",
    ROOT.parent / "shared" / "realdata" / "configs" / "meta-llama__Meta-Llama-3-8B-Instruct.json",
    ROOT.parent / "shared" / "realdata" / "configs" / "mistralai__Mixtral-8x7B-Instruct-v0.1.json",
    ROOT.parent / "shared" / "realdata" / "configs" / "google__flan-t5-large.json",
]
RUNS = 500
LIMIT_MS = 10.0


def main() -> int:
    worst = 0.0
    for path in CONFIGS:
        if not path.exists():
            print(f"skip {path.name}: not present")
            continue
        cfg = json.loads(path.read_text("utf-8"))
        estimate(cfg)  # warm imports and caches
        t0 = time.perf_counter()
        for _ in range(RUNS):
            est = estimate(cfg)
            est.to_json()
        ms = (time.perf_counter() - t0) / RUNS * 1000
        worst = max(worst, ms)
        print(f"{path.name:<48} {ms:7.3f} ms per estimate + to_json (mean of {RUNS}), {len(est.structure)} structure rows")
    print(f"worst mean {worst:.3f} ms: {'under' if worst < LIMIT_MS else 'OVER'} the {LIMIT_MS:.0f} ms budget")
    return 0 if worst < LIMIT_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Time `tracker scan` over a generated 5,000-file repository: the target is under 10 s.

Run: python bench/bench_scan.py [--files 5000] [--no-hub]

The repository (in a temporary folder) holds Python modules (a third mention a loading
call, so they are parsed; a tenth load a model), notebooks with outputs, YAML, JSON and
TOML configs, plus a .venv, node_modules and a .gitignored build folder that must not be
read. Two figures: finding the references alone, and the whole `tracker scan --format json`
with its advisory lookups against a local Hub stand-in (one repo per distinct model id).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # before huggingface_hub is imported

from tracker.pipeline.scan import find_references

LIMIT_S = 10.0
REPOS = [f"bench/model-{i}" for i in range(5)]

PLAIN = '''
import os
import sys


def step_{i}(values):
    """Some ordinary code: parsed only when it mentions a loading call."""
    total = 0
    for value in values:
        if value % 3 == 0:
            total += value * {i}
        else:
            total -= value
    return total


class Worker{i}:
    def __init__(self, name):
        self.name = name
        self.items = [step_{i}(range(n)) for n in range(10)]

    def run(self):
        return {{"name": self.name, "items": self.items, "env": os.environ.get("HOME"), "argv": sys.argv}}
'''

LOADS = '''
from transformers import AutoModel, AutoTokenizer, pipeline

MODEL = "{repo}"
REVISION = "{revision}"


def load():
    model = AutoModel.from_pretrained(MODEL, revision=REVISION)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    return model, tokenizer, pipeline("text-classification", model="{repo}")
'''

MENTIONS = '''
# This module builds a sklearn-style pipeline; it names no Hub model.
def pipeline(*steps):
    return list(steps)


PIPE = pipeline("scale", "fit")
'''


def notebook(i: int, repo: str) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": [f"# Notebook {i}\n"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [
            {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo" + "A" * 20000}, "metadata": {}}],
         "source": ["%matplotlib inline\n", "from transformers import AutoModel\n",
                    f"model = AutoModel.from_pretrained(\"{repo}\")\n"]},
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


def generate(root: Path, files: int, shas: dict[str, str]) -> None:
    rng = random.Random(13)
    kinds = ["py"] * 60 + ["ipynb"] * 5 + ["yaml"] * 15 + ["json"] * 12 + ["toml"] * 8
    for i in range(files):
        kind = rng.choice(kinds)
        folder = root / f"pkg{i % 40}" / f"sub{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        repo = rng.choice(REPOS)
        if kind == "py":
            roll = rng.random()
            body = (LOADS.format(repo=repo, revision=shas[repo]) if roll < 0.1
                    else MENTIONS if roll < 0.33 else "") + PLAIN.format(i=i) * 4
            (folder / f"mod{i}.py").write_text(body)
        elif kind == "ipynb":
            (folder / f"nb{i}.ipynb").write_text(notebook(i, repo))
        elif kind == "yaml":
            model = f"model_name_or_path: {repo}\nmodel_revision: {shas[repo]}\n" if rng.random() < 0.2 else ""
            (folder / f"c{i}.yaml").write_text(f"name: job{i}\n{model}steps:\n" + "  - run: make\n" * 30)
        elif kind == "json":
            data = {"name": f"c{i}", "values": list(range(200))}
            if rng.random() < 0.2:
                data["model"] = repo
            (folder / f"c{i}.json").write_text(json.dumps(data, indent=2))
        else:
            model = f'model_id = "{repo}"\n' if rng.random() < 0.2 else ""
            (folder / f"c{i}.toml").write_text(f'[job]\nname = "c{i}"\n{model}retries = 3\n')
    # Never read: an environment, vendored packages, an ignored build folder.
    (root / ".gitignore").write_text("build/\n")
    for folder in (root / ".venv" / "lib", root / "node_modules" / "pkg", root / "build"):
        folder.mkdir(parents=True, exist_ok=True)
        for j in range(500):
            (folder / f"x{j}.py").write_text(LOADS.format(repo="bench/never", revision="main"))
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--no-hub", action="store_true", help="time finding only (no Hub stand-in)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
        hub = None
        shas = {repo: "main" for repo in REPOS}
        if not args.no_hub:
            from hubstandin.hub import HubStandin

            hub = HubStandin(Path(tmp) / "hub").start()
            for repo in REPOS:
                hub.create_repo(repo)
                first = hub.commit(repo, {"config.json": b'{"model_type": "bert"}', "README.md": "# m\n"})
                hub.commit(repo, {"README.md": "# m\n\nmore\n"})
                shas[repo] = first
        root_dir = Path(tmp) / "repo"
        generate(root_dir, args.files, shas)
        counted = sum(len(f) for _, _, f in os.walk(root_dir))

        t0 = time.perf_counter()
        found = find_references(root_dir)
        find_s = time.perf_counter() - t0
        print(f"repository: {args.files} files to read (+{counted - args.files} in .venv, node_modules, "
              f"build/ and .gitignore)")
        print(f"find: {find_s:.2f} s, {found.files_read} files read, {len(found.references)} references, "
              f"{len(found.skipped)} skipped")
        ok = find_s < LIMIT_S
        if hub is not None:
            from click.testing import CliRunner

            from tracker.surfaces.cli import main as cli

            config = Path(tmp) / "empty.toml"
            config.write_text("")
            env = {"HF_ENDPOINT": hub.url, "TRACKER_CONFIG": str(config),
                   "TRACKER_DATABASE_URL": f"sqlite:///{tmp}/user.sqlite3", "HF_HUB_DISABLE_TELEMETRY": "1"}
            t0 = time.perf_counter()
            out = CliRunner().invoke(cli, ["scan", str(root_dir), "--format", "json"], env=env)
            scan_s = time.perf_counter() - t0
            summary = json.loads(out.output)["summary"]
            print(f"tracker scan --format json: {scan_s:.2f} s (exit {out.exit_code}), "
                  f"{summary['references']} references to {len(REPOS)} repos, {summary['pinned']} pinned")
            hub.stop()
            ok = ok and scan_s < LIMIT_S
        print(f"target: < {LIMIT_S:.0f} s  ->  {'ok' if ok else 'TOO SLOW'}")
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

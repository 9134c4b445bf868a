"""Revisions processed per second, end to end: list, read from the Hub stand-in, analyse, save.

Run: python bench/bench_throughput.py [--repos 20] [--revisions 10] [--workers 4] [--postgres]

Each repo gets an initial commit and ``--revisions`` more, each changing one of config.json,
generation_config.json, the chat template in tokenizer_config.json or the README in turn (so
update advisories, template diffs and estimator reruns all happen). The stand-in serves them from
a subprocess; the tracker polls every repo once with ``backfill``, so the first poll reads the
baseline and every revision after it, on ``--workers`` threads. Printed: revisions per second
(wall), CPU milliseconds per revision in the tracker's process, advisories raised.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hubstandin.gitrepos import RepoStore

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def config(layers: int) -> bytes:
    return json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                       "num_hidden_layers": layers, "num_attention_heads": 16, "num_key_value_heads": 8,
                       "intermediate_size": 5632, "vocab_size": 32000, "max_position_embeddings": 4096,
                       "torch_dtype": "bfloat16"}, indent=2).encode()


def build(root: Path, repos: int, revisions: int) -> list[str]:
    store = RepoStore(root)
    ids = []
    for r in range(repos):
        repo_id = f"owner{r % 5}/model-{r}"
        store.create_repo(repo_id)
        store.commit(repo_id, {"config.json": config(22), "generation_config.json": b'{"eos_token_id": 2}',
                               "tokenizer_config.json": json.dumps({"chat_template": TEMPLATE}).encode(),
                               "README.md": b"---\nlicense: apache-2.0\n---\n# model\n"}, message="initial")
        for k in range(revisions):
            step = k % 4
            if step == 0:
                files = {"generation_config.json": json.dumps({"eos_token_id": [2, 100 + k]}).encode()}
            elif step == 1:
                files = {"tokenizer_config.json": json.dumps({"chat_template": TEMPLATE.replace(
                    "<|assistant|>", f"<|assistant{k}|>")}).encode()}
            elif step == 2:
                files = {"config.json": config(22 + k)}
            else:
                files = {"README.md": f"---\nlicense: apache-2.0\n---\n# model\n\nrevision {k}\n".encode()}
            store.commit(repo_id, files, message=f"change {k}")
        ids.append(repo_id)
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--revisions", type=int, default=10, help="new revisions per repo after the first")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-throughput-")))
        repo_ids = build(tmp / "hub", args.repos, args.revisions)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        standin = subprocess.Popen([sys.executable, "-m", "hubstandin", "--root", str(tmp / "hub"), "--port",
                                    str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1"})
        stack.callback(standin.terminate)
        endpoint = f"http://127.0.0.1:{port}"
        import httpx

        for _ in range(100):
            try:
                httpx.get(f"{endpoint}/api/models?limit=1", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        if args.postgres:
            from tests.postgres import fresh_database, postgres_server

            url = fresh_database(stack.enter_context(postgres_server()))
        else:
            url = f"sqlite:///{tmp}/tracker.sqlite3"

        from tracker.adapters.settings import Settings
        from tracker.app import make_tracker

        tracker = make_tracker(Settings(database={"url": url}, hub={"endpoint": endpoint}), auto_upgrade=True)
        for repo_id in repo_ids:
            tracker.store.repos.add(repo_id, now=tracker.clock())
        wall, cpu = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(args.workers) as pool:
            results = list(pool.map(lambda r: tracker.poller.poll_repo(r, backfill=args.revisions), repo_ids))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        processed = sum(r.processed for r in results)
        errors = [r.line() for r in results if r.error]
        assert not errors, errors
        expected = args.repos * (args.revisions + 1)
        assert processed == expected, (processed, expected)
        advisories = len(tracker.store.advisories.find())
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"{'PostgreSQL' if args.postgres else 'SQLite'}, {args.workers} workers, stand-in in a subprocess")
        print(f"{processed} revisions ({args.repos} repos x {args.revisions + 1}, baselines included), "
              f"{advisories} advisories, in {wall:.1f}s: {processed / wall:.1f} revisions/s, "
              f"tracker CPU {cpu * 1000 / processed:.0f} ms per revision")
        tracker.store.close()


if __name__ == "__main__":
    main()

"""Serve a local Hub stand-in from the command line, and commit to a running one.

Usage::

    python -m hubstandin --root DIR [--host 127.0.0.1] [--port 8765] [--seed-demo]
    python -m hubstandin commit REPO PATH=FILE [PATH=FILE ...] [-m MESSAGE] [--delete PATH] [--create]
                                [--endpoint URL]

Serves every repo found under ``DIR/repos/`` (bare git repositories named
``<ns>/<name>.git`` with a ``standin.json`` beside the git data; see
:mod:`hubstandin.gitrepos`). ``--seed-demo`` first adds ``acme/tiny-model``
(two commits, tag ``v1``, ``refs/pr/1``, an LFS ``model.safetensors``),
``acme/sharded-model`` (index + two shards) and the README's example repos with
short histories (``intfloat/multilingual-e5-large``, ``Qwen/Qwen2.5-7B-Instruct``,
``meta-llama/Llama-3.1-8B-Instruct``, ``acme/llama-ft-gguf``), unless they exist.

At start it writes ``DIR/tracker.toml``, a tracker config of its own: this stand-in as the Hub
and a database under ``DIR``, so ``export TRACKER_CONFIG=DIR/tracker.toml`` points the
tracker here without touching the watch list or database of another config.

``commit`` adds a commit to a running stand-in (its ``--endpoint``, default ``HF_ENDPOINT``,
else ``http://127.0.0.1:8765``): each ``PATH=FILE`` puts the local FILE at PATH in the repo.

To point the client at it *before* importing huggingface_hub::

    export HF_ENDPOINT=http://127.0.0.1:8765 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_XET=1

The line printed at start-up gives the exact ``HF_ENDPOINT``. LFS downloads are
redirected to the same port under the other loopback name (``localhost``), which
the client treats as a separate CDN origin. Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from .hub import HubStandin


def seed_demo(hub: HubStandin) -> None:
    """Create the demo repos described in the module docstring (idempotent)."""
    import numpy as np
    from safetensors.numpy import save

    if "acme/tiny-model" not in hub.store.repo_ids():
        hub.create_repo("acme/tiny-model")
        first = hub.commit(
            "acme/tiny-model",
            {
                "config.json": json.dumps({"model_type": "llama", "hidden_size": 8}, indent=2) + "\n",
                "tokenizer_config.json": json.dumps({"chat_template": "{{ messages }}"}, indent=2) + "\n",
                "model.safetensors": save({"w": np.zeros((8, 8), dtype=np.float32)}),
                "sub/extra.txt": "extra\n",
            },
            message="initial commit",
        )
        hub.tag("acme/tiny-model", "v1", first)
        hub.commit(
            "acme/tiny-model",
            {"config.json": json.dumps({"model_type": "llama", "hidden_size": 16}) + "\n"},
            message="Bump hidden size",
        )
        hub.commit("acme/tiny-model", {"README.md": "# PR\n"}, branch="refs/pr/1", message="Add README")
    if "acme/sharded-model" not in hub.store.repo_ids():
        hub.create_repo("acme/sharded-model")
        shard1 = save({"a": np.ones((4, 4), dtype=np.float16)})
        shard2 = save({"b": np.ones((2,), dtype=np.float32)})
        index = {
            "metadata": {"total_size": 40},
            "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"},
        }
        hub.commit(
            "acme/sharded-model",
            {
                "config.json": "{}\n",
                "model.safetensors.index.json": json.dumps(index, indent=2),
                "model-00001-of-00002.safetensors": shard1,
                "model-00002-of-00002.safetensors": shard2,
            },
            message="initial commit",
        )


def _config(**values: object) -> str:
    return json.dumps(values, indent=2) + "\n"


def _e5_config(**changes: object) -> str:
    base = {"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "hidden_size": 1024,
            "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096, "vocab_size": 250002,
            "max_position_embeddings": 514, "type_vocab_size": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    return _config(**{**base, **changes})


def _llama_config(**changes: object) -> str:
    base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
            "rope_theta": 500000.0, "eos_token_id": [128001, 128008, 128009], "torch_dtype": "bfloat16"}
    return _config(**{**base, **changes})


def _qwen_config(**changes: object) -> str:
    base = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
            "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "intermediate_size": 18944, "vocab_size": 152064, "max_position_embeddings": 32768,
            "eos_token_id": 151645, "torch_dtype": "bfloat16"}
    return _config(**{**base, **changes})


# The README's example repos, each with a short history of the kind of change the tracker reports.
README_REPOS: dict[str, list[tuple[str, dict[str, str]]]] = {
    "intfloat/multilingual-e5-large": [
        ("initial commit", {"config.json": _e5_config(), "README.md": "---\nlibrary_name: sentence-transformers\n"
                            "---\n# multilingual-e5-large\n"}),
        ("Update README.md", {"README.md": "---\nlibrary_name: sentence-transformers\n---\n# multilingual-e5-large"
                              "\n\nQueries start with `query: `.\n"}),
        ("eos_token_id 250001", {"config.json": _e5_config(eos_token_id=250001)}),
        ("Longer context: 8194 positions", {"config.json": _e5_config(eos_token_id=250001,
                                                                      max_position_embeddings=8194)}),
    ],
    "Qwen/Qwen2.5-7B-Instruct": [
        ("initial commit", {"config.json": _qwen_config(),
                            "generation_config.json": _config(eos_token_id=[151645, 151643], temperature=0.7)}),
        ("Update generation_config.json", {"generation_config.json": _config(eos_token_id=[151645, 151643],
                                                                             temperature=0.7, top_p=0.8)}),
    ],
    "meta-llama/Llama-3.1-8B-Instruct": [
        ("initial commit", {"config.json": _llama_config(),
                            "generation_config.json": _config(eos_token_id=[128001, 128008, 128009])}),
        ("Update config.json", {"config.json": _llama_config(rope_scaling={"rope_type": "llama3", "factor": 8.0})}),
    ],
    "acme/llama-ft-gguf": [
        ("initial commit", {"README.md": "---\nbase_model: meta-llama/Llama-3.1-8B-Instruct\n---\n# A fine-tune\n"}),
    ],
}
README_LISTINGS: dict[str, dict[str, object]] = {
    "intfloat/multilingual-e5-large": {"library_name": "sentence-transformers", "downloads": 20_000},
    "meta-llama/Llama-3.1-8B-Instruct": {"pipeline_tag": "text-generation", "library_name": "transformers"},
    "Qwen/Qwen2.5-7B-Instruct": {"pipeline_tag": "text-generation", "library_name": "transformers"},
}


def seed_readme(hub: HubStandin) -> None:
    """The README's example repos with their histories (idempotent: a repo already there is left alone)."""
    for repo_id, steps in README_REPOS.items():
        if repo_id in hub.store.repo_ids():
            continue
        hub.create_repo(repo_id)
        for message, files in steps:
            hub.commit(repo_id, dict(files), message=message)
        if repo_id in README_LISTINGS:
            hub.set_listing(repo_id, **README_LISTINGS[repo_id])  # type: ignore[arg-type]


def write_tracker_config(root: Path, url: str) -> Path:
    """``root/tracker.toml``: the tracker pointed at this stand-in, with a database of its own under ``root``."""
    path = root / "tracker.toml"
    path.write_text(
        "# Written by `python -m hubstandin`: the tracker against this stand-in, with its own database and\n"
        "# watch list (none of another config's repos). Use it with: export TRACKER_CONFIG=" + str(path) + "\n\n"
        f'[hub]\nendpoint = "{url}"\n\n[database]\nurl = "sqlite:///{root.resolve() / "tracker.sqlite3"}"\n\n'
        '[poll]\njitter = "0s"\n',
        encoding="utf-8",
    )
    return path


def commit_main(argv: list[str]) -> int:
    """``python -m hubstandin commit``: one commit to a running stand-in, over its own endpoint."""
    parser = argparse.ArgumentParser(prog="python -m hubstandin commit",
                                     description="Commit local files to a repo of a running stand-in.")
    parser.add_argument("repo", help="the repo, owner/name")
    parser.add_argument("files", nargs="*", metavar="PATH=FILE", help="put the local FILE at PATH in the repo")
    parser.add_argument("-m", "--message", default="update", help="the commit title")
    parser.add_argument("--delete", action="append", default=[], metavar="PATH", help="remove PATH (repeatable)")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--create", action="store_true", help="make the repo first if it is not there")
    parser.add_argument("--endpoint", default=os.environ.get("HF_ENDPOINT") or "http://127.0.0.1:8765",
                        help="the running stand-in (default: HF_ENDPOINT, else http://127.0.0.1:8765)")
    args = parser.parse_args(argv)
    files: dict[str, str] = {}
    for item in args.files:
        path, sep, local = item.partition("=")
        if not sep or not path or not local:
            parser.error(f"{item!r}: give PATH=FILE, e.g. config.json=./config.json")
        try:
            files[path] = base64.b64encode(Path(local).read_bytes()).decode()
        except OSError as exc:
            print(f"error: {local}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    body = json.dumps({"files": files, "delete": args.delete, "message": args.message, "branch": args.branch,
                       "create": args.create}).encode()
    url = f"{args.endpoint.rstrip('/')}/api/_standin/commit/{args.repo}"
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            sha = json.loads(answer.read())["sha"]
    except urllib.error.HTTPError as exc:
        print(f"error: {args.repo}: {exc.headers.get('X-Error-Message') or exc.reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"error: cannot reach the stand-in at {args.endpoint} ({reason}): is it running? (--endpoint)",
              file=sys.stderr)
        return 1
    print(f"committed {sha[:12]} to {args.repo} ({args.branch}): {args.message}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hubstandin", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="storage directory (repos/ and .standin/)")
    parser.add_argument("--host", default="127.0.0.1", help="API host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (0 = any free port)")
    parser.add_argument("--seed-demo", action="store_true", help="add the demo repos first")
    parser.add_argument("--commits-page-size", type=int, default=50)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["commit"]:
        return commit_main(argv[1:])
    args = parser.parse_args(argv)
    hub = HubStandin(
        args.root, host=args.host, port=args.port, commits_page_size=args.commits_page_size, log_level="info"
    )
    if args.seed_demo:
        seed_demo(hub)
        seed_readme(hub)
    try:
        hub.start()
    except OSError as exc:  # the port is taken (or the address is not this machine's): one line
        print(f"error: cannot serve on {args.host}:{args.port} ({exc.strerror or exc}): pass another --port",
              file=sys.stderr)
        return 1
    config = write_tracker_config(args.root, hub.url)
    print(f"Hub stand-in serving {len(hub.store.repo_ids())} repos from {args.root}")
    for repo_id in hub.store.repo_ids():
        print(f"  {repo_id}")
    print(f"HF_ENDPOINT={hub.url}  (LFS CDN at {hub.cdn_url})")
    print(f"Point the tracker here (its own config and database): export TRACKER_CONFIG={config}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

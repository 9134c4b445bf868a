"""Serve a local Hub stand-in from the command line.

Usage::

    python -m hubstandin --root DIR [--host 127.0.0.1] [--port 8765] [--seed-demo]

Serves every repo found under ``DIR/repos/`` (bare git repositories named
``<ns>/<name>.git`` with a ``standin.json`` beside the git data; see
:mod:`hubstandin.gitrepos`). ``--seed-demo`` first adds ``acme/tiny-model``
(two commits, tag ``v1``, ``refs/pr/1``, an LFS ``model.safetensors``) and
``acme/sharded-model`` (index + two shards) unless they exist.

Point the client at it *before* importing huggingface_hub::

    export HF_ENDPOINT=http://127.0.0.1:8765 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_XET=1

The line printed at start-up gives the exact ``HF_ENDPOINT``. LFS downloads are
redirected to the same port under the other loopback name (``localhost``), which
the client treats as a separate CDN origin. Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import threading
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hubstandin", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="storage directory (repos/ and .standin/)")
    parser.add_argument("--host", default="127.0.0.1", help="API host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (0 = any free port)")
    parser.add_argument("--seed-demo", action="store_true", help="add the demo repos first")
    parser.add_argument("--commits-page-size", type=int, default=50)
    args = parser.parse_args(argv)
    hub = HubStandin(
        args.root, host=args.host, port=args.port, commits_page_size=args.commits_page_size, log_level="info"
    )
    if args.seed_demo:
        seed_demo(hub)
    hub.start()
    print(f"Hub stand-in serving {len(hub.store.repo_ids())} repos from {args.root}")
    for repo_id in hub.store.repo_ids():
        print(f"  {repo_id}")
    print(f"HF_ENDPOINT={hub.url}  (LFS CDN at {hub.cdn_url})", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``tracker demo``: the tracker over a scripted upstream history, offline, in a minute.

It starts the local Hub stand-in (``hubstandin``, installed with ``pip install -e ./standin``)
with ``intfloat/multilingual-e5-large`` made of its real ``config.json``, then plays four
revisions as upstream would have pushed them, polling after each, with a real tracker (its own
SQLite database in a temporary directory):

1. the baseline: config, tokenizer config with a chat template, model card, ``model.safetensors``
   (real tensor names and shapes; the file is sparse, so it takes no disk);
2. a README edit;
3. the chat template now appends the end-of-sequence token, and ``eos_token_id`` changes;
4. a longer context (514 -> 8194 positions) with the weights re-uploaded to match, and a
   ``pytorch_model.bin`` pickle added beside them.

A local receiver is subscribed to every advisory and prints each alert it gets (signed per
Standard Webhooks, and verified); the pages, the feeds and the OSV API are served on
``http://HOST:PORT/``. Nothing reaches the network: every address is loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import tempfile
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.core.advisory.record import AdvisoryParseError, parse_advisory
from tracker.core.model import RepoId
from tracker.services import NewSubscription, Subscriptions, Watching

if TYPE_CHECKING:
    from tracker.app import Tracker

REPO = RepoId("intfloat/multilingual-e5-large")
DATA = Path(__file__).resolve().parent / "demo_data"
HIDDEN, LAYERS, INTERMEDIATE, VOCAB = 1024, 24, 4096, 250002

# e5 wants "query: " and "passage: " prefixes; a template that adds them is what a chat-style
# wrapper of an embedding model looks like. The fix appends the end-of-sequence token.
TEMPLATE_BEFORE = ("{% for message in messages %}{% if message['role'] == 'user' %}query: {{ message['content'] }}"
                   "{% else %}passage: {{ message['content'] }}{% endif %}{{ '\\n' }}{% endfor %}")
TEMPLATE_AFTER = ("{% for message in messages %}{% if message['role'] == 'user' %}query: {{ message['content'] }}"
                  "{{ eos_token }}{% else %}passage: {{ message['content'] }}{{ eos_token }}{% endif %}{{ '\\n' }}"
                  "{% endfor %}")

README_BEFORE = """---
license: mit
language:
- multilingual
tags:
- sentence-transformers
- feature-extraction
---

# multilingual-e5-large

Text embeddings by weakly-supervised contrastive pre-training, 24 layers, 1024 dimensions.

Prefix each input with "query: " or "passage: ".
"""
README_AFTER = README_BEFORE + """
## FAQ

**Do I need the prefixes?** Yes: without them, quality drops.
"""


class DemoUnavailable(RuntimeError):
    """The demo cannot run here (the Hub stand-in is not installed); the message says what to do."""


def e5_config(**changes: Any) -> bytes:
    """The real config.json of intfloat/multilingual-e5-large (shipped in demo_data/), with changes."""
    config = json.loads((DATA / "intfloat__multilingual-e5-large.config.json").read_text())
    config.update(changes)
    return (json.dumps(config, indent=2) + "\n").encode()


def tokenizer_config(template: str) -> bytes:
    specials = {"0": "<s>", "1": "<pad>", "2": "</s>", "3": "<unk>", "250001": "<mask>"}
    config = {
        "added_tokens_decoder": {i: {"content": c, "lstrip": c == "<mask>", "normalized": False, "rstrip": False,
                                     "single_word": False, "special": True} for i, c in specials.items()},
        "bos_token": "<s>", "chat_template": template, "clean_up_tokenization_spaces": True,
        "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>", "model_max_length": 512,
        "pad_token": "<pad>", "sep_token": "</s>", "tokenizer_class": "XLMRobertaTokenizer", "unk_token": "<unk>",
    }
    return (json.dumps(config, indent=2) + "\n").encode()


def e5_tensors(positions: int) -> dict[str, tuple[str, list[int]]]:
    """The tensor names and shapes of the real checkpoint (XLMRobertaModel, F32)."""
    tensors: dict[str, tuple[str, list[int]]] = {
        "embeddings.word_embeddings.weight": ("F32", [VOCAB, HIDDEN]),
        "embeddings.position_embeddings.weight": ("F32", [positions, HIDDEN]),
        "embeddings.token_type_embeddings.weight": ("F32", [1, HIDDEN]),
        "embeddings.LayerNorm.weight": ("F32", [HIDDEN]),
        "embeddings.LayerNorm.bias": ("F32", [HIDDEN]),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for part in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            tensors[f"{p}{part}.weight"] = ("F32", [HIDDEN, HIDDEN])
            tensors[f"{p}{part}.bias"] = ("F32", [HIDDEN])
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{p}{norm}.weight"] = ("F32", [HIDDEN])
            tensors[f"{p}{norm}.bias"] = ("F32", [HIDDEN])
        tensors[f"{p}intermediate.dense.weight"] = ("F32", [INTERMEDIATE, HIDDEN])
        tensors[f"{p}intermediate.dense.bias"] = ("F32", [INTERMEDIATE])
        tensors[f"{p}output.dense.weight"] = ("F32", [HIDDEN, INTERMEDIATE])
        tensors[f"{p}output.dense.bias"] = ("F32", [HIDDEN])
    tensors["pooler.dense.weight"] = ("F32", [HIDDEN, HIDDEN])
    tensors["pooler.dense.bias"] = ("F32", [HIDDEN])
    return tensors


def sparse_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> Path:
    """A valid safetensors file of all-zero tensors, written sparse (no numpy, no disk for the data)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        fh.truncate(8 + len(raw) + offset)
    return path


def torch_pickle(path: Path) -> Path:
    """A small PyTorch zip checkpoint: ``archive/data.pkl`` rebuilding one tensor, as torch.save writes it.

    Written opcode by opcode (protocol 2) so the demo needs no torch: an OrderedDict holding a
    ``torch._utils._rebuild_tensor_v2`` call over a persistent storage id. Harmless, but a pickle.
    """
    def text(s: str) -> bytes:
        data = s.encode()
        return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE

    storage = (b"(" + text("storage") + b"ctorch\nFloatStorage\n" + text("0") + text("cpu")
               + b"K\x04" + b"tQ")  # MARK ... TUPLE, BINPERSID
    tensor = (b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage + b"K\x00" + b"K\x04\x85" + b"K\x01\x85"
              + b"\x89" + b"ccollections\nOrderedDict\n)R" + b"tR")  # storage, offset, size, stride, grad, hooks
    pkl = (b"\x80\x02" + b"ccollections\nOrderedDict\n)R" + b"(" + text("pooler.dense.scale") + tensor + b"u.")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", b"\0" * 16)
        zf.writestr("archive/version", "3\n")
    return path


@dataclass(frozen=True)
class Step:
    message: str
    files: Callable[[Path], dict[str, Any]]


def history() -> list[Step]:
    """The scripted revisions, oldest first (file contents made in a work directory)."""
    return [
        Step("initial commit", lambda work: {
            "config.json": e5_config(),
            "tokenizer_config.json": tokenizer_config(TEMPLATE_BEFORE),
            "README.md": README_BEFORE,
            "model.safetensors": sparse_safetensors(work / "model-514.safetensors", e5_tensors(514)),
        }),
        Step("Update README.md", lambda work: {"README.md": README_AFTER}),
        Step("Append the end-of-sequence token in the chat template; eos_token_id 250001", lambda work: {
            "tokenizer_config.json": tokenizer_config(TEMPLATE_AFTER),
            "config.json": e5_config(eos_token_id=250001),
        }),
        Step("Longer context: 8194 positions, weights re-uploaded, PyTorch checkpoint added", lambda work: {
            "config.json": e5_config(eos_token_id=250001, max_position_embeddings=8194),
            "model.safetensors": sparse_safetensors(work / "model-8194.safetensors", e5_tensors(8194)),
            "pytorch_model.bin": torch_pickle(work / "pytorch_model.bin"),
        }),
    ]


def play(hub: Any, tracker: Tracker, work: Path, *, say: Callable[[str], None] = print) -> list[str]:
    """Push the history to the stand-in, polling after each revision as the daemon would; the shas."""
    shas = []
    steps = history()
    hub.create_repo(REPO)
    Watching(tracker).add(REPO)
    for step in steps:
        shas.append(hub.commit(REPO, step.files(work), message=step.message))
        for result in tracker.poll([REPO]):
            say(f"  {result.line()}")
    return shas


class AlertLog:
    """A local webhook receiver: verifies each alert's signature and says what it announced."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.secret: str | None = None
        self.received: list[dict[str, Any]] = []
        log = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the http.server API names it so
                body = self.rfile.read(min(int(self.headers.get("content-length") or 0), 8 * 1024 * 1024))
                log.receive(body, {k.lower(): v for k, v in self.headers.items()})
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # quiet: the alert line is enough
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, name="demo-alerts", daemon=True)

    def receive(self, body: bytes, headers: dict[str, str]) -> None:
        from standardwebhooks import Webhook

        try:
            payload = Webhook(self.secret or "").verify(body.decode(), headers)
        except Exception as exc:  # a bad signature is worth a line, not a traceback
            self.say(f"alert refused: {exc}")
            return
        self.received.append(payload)
        try:
            record = parse_advisory(payload.get("data") or {})
        except AdvisoryParseError as exc:
            self.say(f"alert (signature verified) without a readable advisory: {exc}")
            return
        severity = (record.specific.severity or "").lower()
        self.say(f"alert (signature verified): {payload.get('type')} [{severity}] {record.id}: {record.summary}")

    def start(self) -> AlertLog:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _hermetic_environment(work: Path) -> None:
    """No telemetry, no token, no cache shared with the user's: set before huggingface_hub is imported."""
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_XET"] = "1"
    os.environ["HF_HOME"] = str(work / "hf-home")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        os.environ.pop(name, None)


def run_demo(*, host: str = "127.0.0.1", port: int = 8080, keep: Path | None = None,
             say: Callable[[str], None] = print, serve: bool = True) -> None:
    """Start the stand-in, play the history, serve the pages until interrupted (or return, ``serve=False``)."""
    try:
        from hubstandin import HubStandin
    except ImportError:
        raise DemoUnavailable("the demo needs the local Hub stand-in: pip install -e ./standin "
                              "(from a checkout of upstream-tracker)") from None
    if keep is not None:  # a folder that cannot be made: one line (the CLI's), before anything starts
        keep.mkdir(parents=True, exist_ok=True)
    # Bound before anything starts: a port in use is one clear line, and the URL printed is live.
    listening = _listen(host, port)
    port = listening.getsockname()[1]
    url = f"http://{host}:{port}"
    work = keep or Path(tempfile.mkdtemp(prefix="tracker-demo-"))
    _hermetic_environment(work)
    from tracker.adapters.settings import (
        ApiSettings,
        DatabaseSettings,
        DeliverySettings,
        HubSettings,
        OsvSettings,
        Settings,
    )
    from tracker.app import make_tracker

    hub = alerts = tracker = sender = None
    try:
        hub = HubStandin(work / "hub", host="127.0.0.1").start()
        alerts = AlertLog(say).start()
        settings = Settings(database=DatabaseSettings(url=f"sqlite:///{work}/tracker.sqlite3"),
                            hub=HubSettings(endpoint=hub.url, timeout=30.0), api=ApiSettings(public_url=url),
                            osv=OsvSettings(api_url=None),
                            delivery=DeliverySettings(allow_hosts=("127.0.0.1",), timeout=30.0))
        tracker = make_tracker(settings, auto_upgrade=True)
        say(f"Hub stand-in at {hub.url}; tracker database {work / 'tracker.sqlite3'}")
        if REPO in hub.store.repo_ids():  # a folder kept by an earlier `tracker demo --keep`: serve it again
            say(f"Reusing the demo kept in {work}: its history was played before")
        else:
            sender = _play_and_alert(hub, tracker, alerts, work, url=url, say=say)
        if not serve:
            return
        if sender is not None:
            sender.start()
        _serve_pages(tracker, listening, host=host, url=url, say=say)
    finally:
        if keep is not None and tracker is not None:
            say(kept_line(keep))
        if sender is not None:
            sender.stop()
        if alerts is not None:
            alerts.stop()
        if hub is not None:
            hub.stop()
        if tracker is not None:
            tracker.close()
        listening.close()
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def kept_line(keep: Path) -> str:
    """How to use again what ``tracker demo --keep DIR`` kept."""
    return (f"kept in {keep}: the stand-in's repos ({keep / 'hub'}) and the database ({keep / 'tracker.sqlite3'}). "
            f"`tracker demo --keep {keep}` serves them again; or run `python -m hubstandin --root {keep / 'hub'}` "
            f"and point the tracker at both: TRACKER_DATABASE_URL=sqlite:///{keep / 'tracker.sqlite3'} "
            "HF_ENDPOINT=http://127.0.0.1:8765 tracker serve")


def _play_and_alert(hub: Any, tracker: Tracker, alerts: AlertLog, work: Path, *, url: str,
                    say: Callable[[str], None]) -> Any:
    """Subscribe the alert log, play the history, send its alerts; the delivery worker, to keep sending."""
    subscribed = Subscriptions(tracker).subscribe(NewSubscription(target="*", kind="webhook", url=alerts.url))
    alerts.secret = subscribed.secret
    say(f"Playing the history of {REPO} (4 revisions), polling after each:")
    play(hub, tracker, work, say=say)
    sender = tracker.delivery  # the Tracker's outbox sender, its links to ``url`` (the settings' public_url)
    for _ in range(20):  # one alert per subscription per round, in order
        if not sender.run_once():
            break
    return sender


def _listen(host: str, port: int) -> socket.socket:
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        raise DemoUnavailable(f"cannot serve on {host}:{port} ({exc.strerror}): pass --port") from None
    listening.listen(128)
    return listening


def _serve_pages(tracker: Tracker, listening: socket.socket, *, host: str, url: str,
                 say: Callable[[str], None]) -> None:
    """The pages and the API on the bound socket, until Ctrl-C."""
    import uvicorn

    from tracker.surfaces.api import create_app

    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(tracker, bind_host=host), host=host, port=port, log_level="warning"))
    say("")
    say(f"Open {url}/  (the repo: {url}/repos/{REPO}; its feed: {url}/feeds/{REPO}.atom)")
    say("Stop with Ctrl-C.")
    try:
        server.run(sockets=[listening])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it drained on: that is the way out
        pass
    say("stopped")

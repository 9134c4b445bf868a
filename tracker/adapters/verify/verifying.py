"""``verify_revisions``: fetch both revisions, run them in the limited worker, measure.

What may run is decided by :mod:`.fetching`, how by :mod:`.worker` (in :mod:`.runner`'s subprocess),
what it means by :mod:`tracker.core.verify`. A revision that cannot be run safely gives a measurement
whose verdict is "not verifiable", with the reason; an operational failure (the extra is missing, the
Hub is unreachable, a limit was breached) raises :class:`VerifyError`, one line.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracker.adapters.hub.verify_fetching import Fetched, Fetcher, NotVerifiable, VerifyError
from tracker.adapters.settings import Settings
from tracker.adapters.template_sandbox import TemplateSandbox
from tracker.adapters.verify.prompts import conversations, render_prompts
from tracker.adapters.verify.runner import Limits, run_worker
from tracker.core import verify
from tracker.core.findings.tokenizer import drift_sample
from tracker.core.verify import Verification

INSTALL_HINT = ("tracker verify needs the verify extra: pip install 'upstream-tracker[verify]' "
                "(with a CPU build of torch installed first)")
_EXTRA_MODULES = ("torch", "transformers", "sentence_transformers")


@dataclass(frozen=True)
class VerifyOptions:
    """Everything a verification needs from the settings and the command line."""

    endpoint: str | None
    cache_dir: Path
    max_bytes: int
    max_params: int
    samples: int
    device: str
    limits: Limits
    token: str | bool | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> VerifyOptions:
        options = cls(
            endpoint=settings.hub.endpoint,
            cache_dir=cache_dir(settings),
            max_bytes=settings.verify.max_bytes,
            max_params=settings.verify.max_params,
            samples=settings.verify.samples,
            device=settings.verify.device,
            limits=Limits(settings.verify.max_memory, settings.verify.max_cpu, settings.verify.timeout),
        )
        return replace(options, **{k: v for k, v in overrides.items() if v is not None})


def cache_dir(settings: Settings) -> Path:
    """``[verify] cache_dir``, else ``verify-cache/`` beside the SQLite database, else ``data/verify-cache``."""
    if settings.verify.cache_dir:
        return Path(settings.verify.cache_dir)
    if settings.is_sqlite:
        from sqlalchemy.engine import make_url

        database = make_url(settings.database.url).database
        if database and database != ":memory:":
            return Path(database).parent / "verify-cache"
    return Path("data") / "verify-cache"


def extra_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in _EXTRA_MODULES)


def check_device(device: str) -> None:
    """``cuda`` only where torch sees a CUDA device: asked of a short-lived process, torch is never imported here."""
    if device != "cuda":
        return
    probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"
    try:
        code = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, timeout=120,
                              check=False).returncode
    except subprocess.TimeoutExpired:
        code = -1
    if code != 0:
        raise VerifyError("--device cuda: torch sees no CUDA device on this machine; use --device cpu")


def verify_revisions(repo_id: str, old: str, new: str, options: VerifyOptions) -> Verification:
    """Measure what moved between revisions ``old`` and ``new`` of ``repo_id``."""
    if not extra_installed():
        raise VerifyError(INSTALL_HINT)
    check_device(options.device)
    fetcher = Fetcher(endpoint=options.endpoint, cache_dir=options.cache_dir, max_bytes=options.max_bytes,
                      max_params=options.max_params, token=options.token)
    try:
        before = fetcher.fetch(repo_id, old)
        after = fetcher.fetch(repo_id, new)
    except NotVerifiable as exc:
        return Verification(repo_id, old, new, verify.not_verifiable("unknown", exc.reason))
    if before.kind != after.kind:
        reason = f"the revisions load differently ({before.kind} before, {after.kind} after): nothing to compare"
        return Verification(repo_id, before.sha, after.sha, verify.not_verifiable(after.kind, reason))
    answer = run_worker(_request(before, after, options), options.limits)
    measurement = verify.measure(after.kind, answer["old"], answer["new"], libraries=answer["libraries"],
                                 device=options.device)
    return Verification(repo_id, before.sha, after.sha, measurement, answer.get("seconds"),
                        answer.get("peak_rss_bytes"), before.total_bytes + after.total_bytes)


def _request(before: Fetched, after: Fetched, options: VerifyOptions) -> dict[str, Any]:
    texts = drift_sample()[: options.samples]
    request: dict[str, Any] = {"kind": after.kind, "device": options.device, "texts": list(texts),
                               "old_folder": str(before.folder), "new_folder": str(after.folder), "threads": 2}
    if after.kind == verify.CAUSAL_LM:
        convs = conversations(texts, options.samples)
        with TemplateSandbox() as sandbox:
            old_prompts = render_prompts(before.folder, convs, sandbox)
            new_prompts = render_prompts(after.folder, convs, sandbox)
        request["old_prompts"], request["new_prompts"] = list(old_prompts.texts), list(new_prompts.texts)
        request["old_rendered"], request["new_rendered"] = old_prompts.rendered, new_prompts.rendered
    return request

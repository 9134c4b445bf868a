"""What of a revision may be run, and its download into the tracker's private cache.

The rules, each checked from the Hub's file listing and small JSON files *before* any weight is
downloaded (docs/verify.md, "not verifiable"):

* only safetensors weights are fetched; a revision whose weights are pickles alone
  (``pytorch_model.bin``, ``*.pt``, ...) is not verifiable, and no pickle is ever downloaded;
* a repo that needs its own code (``auto_map`` in ``config.json`` or ``tokenizer_config.json``, a
  sentence-transformers module that is not the library's own) is not verifiable: the libraries are
  always called with ``trust_remote_code=False``;
* a file over ``[verify] max_bytes``, or a selection over it in all, is refused before download;
* a model with more than ``max_params`` parameters (read from the safetensors headers) is not run.

Downloads use huggingface_hub itself (``hf_hub_download``): its cache layout, its resume, and its
handling of the token, which is sent to the Hub only (dropped on the redirect to a CDN).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, NotASafetensorsRepoError, SafetensorsParsingError
from tqdm.auto import tqdm

from tracker.core import verify
from tracker.core.errors import TrackerError, first_line

# Files the libraries read besides the weights: configs, tokenizers, chat templates. Nothing else
# (no .bin, .pt, .pkl, .ckpt, .h5, .msgpack, .onnx, .py) is ever downloaded.
_SMALL_SUFFIXES = (".json", ".txt", ".model", ".jinja", ".tiktoken")
_WEIGHT_SUFFIX = ".safetensors"
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
# Folders of other runtimes or formats: never what transformers or sentence-transformers load.
_SKIP_FOLDERS = ("onnx", "openvino", "coreml", "tflite", "gguf", ".git")
_SMALL_FILE_CAP = 16 * 1024 * 1024  # a config or tokenizer file larger than this is not read here
# The Hub's answers (huggingface_hub's errors), the network's (httpx2's) and the cache's (a full disk).
_HUB_ERRORS = (HfHubHTTPError, httpx2.HTTPError, OSError)


class VerifyError(TrackerError):
    """The verification could not run (the extra is missing, the Hub failed, a limit was breached)."""


class NotVerifiable(Exception):  # a result, not a failure: the CLI prints it as a verdict
    """The revision cannot be run safely; ``reason`` says why, in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Listing:
    """One revision's files, as the Hub lists them: path -> size in bytes."""

    sha: str
    sizes: Mapping[str, int]


@dataclass(frozen=True)
class Fetched:
    """A revision downloaded for running: its folder in the private cache and what decided the run."""

    sha: str
    folder: Path
    files: tuple[str, ...]
    total_bytes: int
    kind: str
    params: int | None


class Fetcher:
    """Lists, checks and downloads revisions of one repo through the real huggingface_hub client."""

    def __init__(self, *, endpoint: str | None, cache_dir: Path, max_bytes: int, max_params: int,
                 token: str | bool | None = None) -> None:
        self.api = HfApi(endpoint=endpoint, token=token)
        self.endpoint = endpoint
        self.token = token
        self.cache_dir = cache_dir
        self.max_bytes = max_bytes
        self.max_params = max_params

    def listing(self, repo_id: str, revision: str) -> Listing:
        try:
            info = self.api.model_info(repo_id, revision=revision, files_metadata=True)
        except _HUB_ERRORS as exc:
            raise VerifyError(f"cannot list {repo_id}@{revision} on the Hub: {first_line(exc)}") from None
        sizes = {s.rfilename: int(s.size or 0) for s in info.siblings or ()}
        return Listing(sha=str(info.sha or revision), sizes=sizes)

    def fetch(self, repo_id: str, revision: str) -> Fetched:
        """Check the revision against the rules above, then download what the run needs.

        Raises :class:`NotVerifiable` (nothing large downloaded) or :class:`VerifyError`.
        """
        listing = self.listing(repo_id, revision)
        files = select_files(listing.sizes)
        weights = [f for f in files if f.endswith(_WEIGHT_SUFFIX)]
        check_no_pickle_only(listing.sizes, weights)
        self._check_sizes(listing.sizes, files)
        small = {f: self._read_json(repo_id, listing.sha, f) for f in files if _decides(f)}
        check_no_remote_code(small)
        kind = detect_kind(small, has_weights=bool(weights), has_tokenizer=any(_is_tokenizer(f) for f in files))
        params = self._params(repo_id, listing.sha) if weights else None
        if params is not None and params > self.max_params and kind != verify.TOKENIZER:
            raise NotVerifiable(
                f"the model has {params:,} parameters, over the limit of {self.max_params:,} (--max-params)")
        folder = self._download(repo_id, listing.sha, files)
        total = sum(listing.sizes[f] for f in files)
        return Fetched(listing.sha, folder, tuple(files), total, kind, params)

    def _check_sizes(self, sizes: Mapping[str, int], files: Sequence[str]) -> None:
        limit = _gib(self.max_bytes)
        for name in files:
            if sizes[name] > self.max_bytes:
                raise NotVerifiable(
                    f"{name} is {_gib(sizes[name])}, over [verify] max_bytes ({limit}): not downloaded")
        total = sum(sizes[f] for f in files)
        if total > self.max_bytes:
            raise NotVerifiable(f"the files to run take {_gib(total)}, over [verify] max_bytes ({limit}): not downloaded")

    def _read_json(self, repo_id: str, sha: str, name: str) -> Any:
        path = self._download_one(repo_id, sha, name)
        if path.stat().st_size > _SMALL_FILE_CAP:
            raise NotVerifiable(f"{name} is larger than {_SMALL_FILE_CAP // (1024 * 1024)} MiB")
        try:
            return json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError):
            raise NotVerifiable(f"{name} is not valid JSON: the libraries could not load the revision") from None

    def _params(self, repo_id: str, sha: str) -> int | None:
        try:
            meta = self.api.get_safetensors_metadata(repo_id, revision=sha)
        except (NotASafetensorsRepoError, SafetensorsParsingError) as exc:
            raise NotVerifiable(f"the safetensors headers cannot be read: {first_line(exc)}") from None
        except _HUB_ERRORS as exc:
            raise VerifyError(f"cannot read the safetensors headers of {repo_id}@{sha[:12]}: {first_line(exc)}") from None
        return sum(meta.parameter_count.values())

    def _download(self, repo_id: str, sha: str, files: Sequence[str]) -> Path:
        folder: Path | None = None
        for name in files:
            path = self._download_one(repo_id, sha, name)
            folder = folder or _snapshot_folder(path, name)
        if folder is None:
            raise NotVerifiable("the revision has no file the libraries load")
        return folder

    def _download_one(self, repo_id: str, sha: str, name: str) -> Path:
        try:
            return Path(hf_hub_download(repo_id, name, revision=sha, cache_dir=self.cache_dir,
                                        endpoint=self.endpoint, token=self.token, tqdm_class=_Quiet))
        except _HUB_ERRORS as exc:
            raise VerifyError(f"cannot download {name} of {repo_id}@{sha[:12]}: {first_line(exc)}") from None


class _Quiet(tqdm):  # type: ignore[type-arg]  # no progress bars in a daemon's output
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        super().__init__(*args, **kwargs)


def _gib(size: int) -> str:
    return f"{size / 1024**3:.2f} GiB" if size >= 1024**3 else f"{size / 1024**2:.1f} MiB"


def _snapshot_folder(path: Path, name: str) -> Path:
    for _ in name.split("/"):
        path = path.parent
    return path


def _skipped(name: str) -> bool:
    return any(part in _SKIP_FOLDERS for part in name.split("/")[:-1])


def select_files(sizes: Mapping[str, int]) -> list[str]:
    """The files a run downloads: small configs and tokenizers, and safetensors weights; sorted."""
    return sorted(f for f in sizes if not _skipped(f) and f.endswith((*_SMALL_SUFFIXES, _WEIGHT_SUFFIX)))


def _decides(name: str) -> bool:
    """The JSON files that decide whether and how a revision runs."""
    return name in ("config.json", "tokenizer_config.json", "modules.json", "config_sentence_transformers.json")


def _is_tokenizer(name: str) -> bool:
    base = posixpath.basename(name)
    return base in ("tokenizer.json", "tokenizer.model", "vocab.txt", "vocab.json", "tokenizer_config.json")


def check_no_pickle_only(sizes: Mapping[str, int], weights: Sequence[str]) -> None:
    """Raise NotVerifiable when a folder's weights are pickles alone (the root, or a module's such as
    ``2_Dense/``): the library would open the pickle, and the tracker never downloads one."""
    pickles = sorted(f for f in sizes if f.endswith(_PICKLE_SUFFIXES) and not _skipped(f))
    with_safetensors = {posixpath.dirname(f) for f in weights}
    alone = [f for f in pickles if posixpath.dirname(f) not in with_safetensors]
    if alone:
        raise NotVerifiable(
            f"the revision has weights only as pickles ({', '.join(alone[:3])}); "
            "the tracker loads safetensors only and never opens a pickle")


def check_no_remote_code(small: Mapping[str, Any]) -> None:
    """Raise NotVerifiable when loading the revision would need the repo's own code."""
    for name in ("config.json", "tokenizer_config.json"):
        data = small.get(name)
        if isinstance(data, dict) and data.get("auto_map"):
            raise NotVerifiable(
                f"{name} has auto_map: loading needs the repo's own code, and the tracker never runs remote code")
    modules = small.get("modules.json")
    if isinstance(modules, list):
        for module in modules:
            kind = module.get("type") if isinstance(module, dict) else None
            if not isinstance(kind, str) or not kind.startswith("sentence_transformers."):
                raise NotVerifiable(
                    f"modules.json names the module {str(kind)[:80]!r}: loading it needs code from outside "
                    "sentence-transformers, and the tracker never runs remote code")


def detect_kind(small: Mapping[str, Any], *, has_weights: bool, has_tokenizer: bool) -> str:
    """The library and task the revision is loaded with, from its layout and ``config.json``."""
    if "modules.json" in small and has_weights:
        return verify.SENTENCE_TRANSFORMERS
    config = small.get("config.json")
    architectures = config.get("architectures") if isinstance(config, dict) else None
    names = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    if has_weights and isinstance(config, dict):
        if any(a.endswith("ForSequenceClassification") for a in names):
            return verify.CLASSIFIER
        if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in names):
            return verify.CAUSAL_LM
        return verify.ENCODER
    if has_tokenizer:
        return verify.TOKENIZER
    raise NotVerifiable("the revision has neither safetensors weights nor a tokenizer to run")

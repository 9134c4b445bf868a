"""Weight files: what a re-upload, a reshard, a header change or a new pickle means.

The tracker never downloads weights. It knows each file's path, size, blob id
and LFS sha256 from the tree listing, the parsed JSON header of a
``.safetensors`` file (read by range requests), and, for a pickle-based
checkpoint, the globals its pickle would import (found statically by
:mod:`tracker.core.findings.picklescan_zip`). From that it says:

* ``weights.file_replaced``: same path, new content hash. The weights a user
  downloads changed even though no file name did, which is invisible in a
  file-name diff and is the commonest silent upstream change.
* Measured deltas (:mod:`tracker.core.findings.weight_delta`): when a safetensors
  checkpoint's content changed and its tensors are the same (names and shapes; dtypes
  equal, or float converted to float), sampled element ranges of every tensor are read
  from both revisions by range requests, within the revision's budget, and compared.
  ``weights.resaved``: every sample identical (header metadata, tensor order or sharding
  changed, the numbers did not); ``weights.dtype_changed``: a float conversion whose
  error is within the narrower dtype's rounding, with the largest relative error
  measured; ``weights.values_changed``: the numbers changed, with the relative L2 change
  per sampled tensor and overall. A re-save or a conversion replaces
  ``weights.file_replaced`` for its files; a values change keeps it. A replaced GGUF file
  whose tensors kept their quantization types is measured the same way.
* ``weights.values_changed`` unmeasured: the safetensors headers of the checkpoint are
  identical (same tensor names, shapes and dtypes) but its content hash
  changed and the samples could not be read (no budget left, a failed read), so the
  numbers are taken to have changed: a retrain or a fix, not a re-export.
* ``weights.tensors_added/removed/reshaped/retyped`` and
  ``weights.parameter_count_changed``: the checkpoint's structure changed.
  Headers are compared per checkpoint *across all its shards*, so a tensor
  that merely moves from shard 1 to shard 2 is not reported as removed+added.
* ``weights.resharded``: same tensors split over a different set of files.
* ``weights.shard_added/removed``, ``weights.file_added/removed``: the set of
  weight files changed (a file renamed with identical bytes is neither: ``files.renamed``
  says it, :func:`tracker.core.findings.files.renames`); ``weights.index_changed``: the sharded index's
  ``weight_map`` lists other tensors; ``weights.index_resharded``: the same
  tensors mapped to other shards.
* Pickle-based files, added or replaced. A file is scanned when its name, in any
  case, is one a loader unpickles (``.bin .pt .pth .ckpt .pth.tar .pkl .pickle .joblib
  .dill .sav``, and compressed joblib or pickle files such as ``.joblib.gz``), when it is
  a container that holds a pickle only sometimes (``.npy``/``.npz`` with object arrays, a
  ``.zip`` with ``*.pkl`` members), or, by content, when it is a ``.model`` (gensim) or
  ``.tar`` (torch's legacy format), LFS or not, or an LFS file of any other name that is
  not a known pickle-free format, and its bytes turn out to be a pickle (as many such
  files per revision as the request budget allows, :func:`content_sniffs_for`; each
  further one is ``weights.not_scanned``). Each gets exactly one of
  ``weights.pickle_dangerous_import`` (it would import something that runs commands,
  reaches the network, or evaluates code: critical), ``weights.pickle_unknown_import``
  (imports outside the tensor rebuild allowlist), ``weights.pickle_unscanned`` (its imports
  could not be read, or only partly and what was read is harmless; critical when loaders
  and scanners could read a file a default loader unpickles differently) or, for a new
  file whose imports are only the torch / numpy / collections rebuild functions,
  ``weights.pickle_added``. A partial scan (members over the cap, a pickle longer than the
  scanned prefix) never lowers what the scanned part showed: the finding says what was
  left unscanned.

Severities come from ``severity/weights.toml``. Pure: reads only through ``inputs``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from tracker.core.bounded import loads_json
from tracker.core.estimate.checkpoint import MAX_TENSOR_DIM, MAX_TENSOR_DIMS
from tracker.core.findings import weight_delta
from tracker.core.findings.files import renames
from tracker.core.findings.inputs import SAFETENSORS, RevisionInputs
from tracker.core.findings.picklescan_zip import MAX_LEGACY_BYTES, UNKNOWN
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import FileEntry, Finding, RevisionChange, Severity

CATEGORY = "weights"

COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".lzma", ".z")
"""What joblib (by magic number) and pandas (by name) decompress before they unpickle."""
COMPRESSED_PICKLE_EXTENSIONS = tuple(f"{ext}{suffix}" for ext in (".joblib", ".pkl", ".pickle")
                                     for suffix in COMPRESSION_SUFFIXES)
"""``model.joblib.gz``, ``frame.pkl.xz``: joblib.load and pandas.read_pickle decompress, then unpickle."""
PICKLE_EXTENSIONS = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", ".dill", ".sav", ".pth.tar",
                     *COMPRESSED_PICKLE_EXTENSIONS)
"""Names a loader unpickles (torch.load, joblib.load, pickle.load, dill): always scanned, compared lower-cased."""
PICKLE_CONTAINER_EXTENSIONS = (".npy", ".npz", ".zip")
"""Hold a pickle only sometimes (object arrays, ``*.pkl`` members): scanned, silent when they hold none."""
CONTENT_EXTENSIONS = (".model", ".tar")
"""Judged by content, LFS or not: gensim's ``*.load()`` unpickles a ``.model`` (where a SentencePiece
``.model`` is protobuf), and ``torch.load`` reads a ``.tar`` (its legacy format, or a zip or pickle so named)."""
WEIGHT_EXTENSIONS = (".safetensors", ".h5", ".gguf", ".onnx", ".msgpack", ".npy", ".npz", *PICKLE_EXTENSIONS)
PICKLE_FREE_EXTENSIONS = (
    ".safetensors", ".gguf", ".onnx", ".h5", ".hdf5", ".msgpack", ".tflite", ".mlmodel", ".spm",
    ".tiktoken", ".json", ".jsonl", ".txt", ".md", ".csv", ".tsv", ".parquet", ".arrow", ".png", ".jpg", ".jpeg",
    ".gif", ".webp", ".bmp", ".svg", ".ico", ".mp3", ".wav", ".flac", ".ogg", ".mp4", ".webm", ".pdf",
)
"""LFS files of these formats are never sniffed for pickle content: their loaders never unpickle."""
REVISION_REQUESTS = 200
"""Range requests one revision's analysis may make (the ``[limits] revision_requests`` default)."""
REQUESTS_PER_SNIFF = 2
"""What judging a file by content costs when it is no pickle: its first 4 bytes, then 508 more."""


def content_sniffs_for(revision_requests: int = REVISION_REQUESTS) -> int:
    """Files judged by content per revision that a request budget allows."""
    return max(1, revision_requests // REQUESTS_PER_SNIFF)


MAX_CONTENT_SNIFFS = content_sniffs_for()
"""Files judged by content per revision (LFS files of other names, ``.model``, ``.tar``); each further
one is ``weights.not_scanned``."""
MAX_CONTENT_SNIFF_BYTES = 64 * 1024
"""Prefix of such a file read as a raw pickle: a loader never unpickles it by name, so no 64 MiB reads for it."""
INDEX_SUFFIXES = (".safetensors.index.json", ".bin.index.json", ".pt.index.json", ".msgpack.index.json", ".h5.index.json")

# model-00001-of-00004.safetensors, pytorch_model-00002-of-00002.bin, model.fp16-00001-of-00002.safetensors
SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})(?P<ext>\.[A-Za-z0-9]+)$")

MAX_INDEX_BYTES = 16 * 1024 * 1024
"""A weight_map of 100k tensors is a few MB; anything larger is not an index we trust."""
MAX_LISTED = 50
"""Names listed in evidence per finding; the count is always exact."""

# ---------------------------------------------------------------------------- pickle classification
#
# Dangerous: importing these from a pickle lets it run a command, open a socket
# or URL, evaluate code, write or delete files, or load another pickle. "*"
# means every name in the module and its submodules. Merged with picklescan's
# own unsafe list (when importable) so that its updates reach us.
_DANGEROUS: dict[str, frozenset[str] | str] = {
    "builtins": frozenset(
        {"eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "open", "input",
         "breakpoint", "apply", "globals", "locals", "vars", "__loader__", "__build_class__"}
    ),
    "__builtin__": frozenset({"eval", "exec", "compile", "__import__", "getattr", "setattr", "open", "apply", "execfile", "file"}),
    "os": "*", "posix": "*", "nt": "*", "subprocess": "*", "pty": "*", "runpy": "*", "commands": "*",
    "socket": "*", "ssl": "*", "http": "*", "httplib": "*", "urllib": "*", "urllib2": "*", "requests": "*",
    "httpx": "*", "aiohttp": "*", "ftplib": "*", "smtplib": "*", "telnetlib": "*", "asyncio": "*",
    "webbrowser": "*", "shutil": "*", "tempfile": "*", "importlib": "*", "pkgutil": "*", "imp": "*",
    "pickle": "*", "_pickle": "*", "marshal": "*", "dill": "*", "cloudpickle": "*", "joblib": "*",
    "ctypes": "*", "_ctypes": "*", "sys": "*", "code": "*", "codeop": "*", "pdb": "*", "bdb": "*",
    "timeit": "*", "profile": "*", "cProfile": "*", "trace": "*", "pydoc": "*", "pip": "*", "venv": "*",
    "types": frozenset({"CodeType", "FunctionType", "ModuleType"}),
    "operator": frozenset({"attrgetter", "itemgetter", "methodcaller"}),
    "_operator": frozenset({"attrgetter", "itemgetter", "methodcaller"}),
    "functools": frozenset({"partial", "reduce"}),
    "numpy": frozenset({"load", "loadtxt", "fromfile"}),
    "torch": frozenset({"load"}),
    "torch.serialization": frozenset({"load"}),
}

# Safe: what torch.load(weights_only=True) needs to rebuild tensors, plus the
# numpy array reconstructors. Anything neither safe nor dangerous is "unknown".
_SAFE: dict[str, frozenset[str]] = {
    "collections": frozenset({"OrderedDict", "Counter", "defaultdict"}),
    "builtins": frozenset({"set", "frozenset", "bytearray", "complex", "slice"}),
    "_codecs": frozenset({"encode"}),
    "torch": frozenset({"Size", "Tensor", "device", "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
                        "per_channel_symmetric", "per_channel_affine_float_qparams"}),
    "torch._tensor": frozenset({"_rebuild_from_type_v2"}),
    "torch.nn.parameter": frozenset({"Parameter"}),
    "torch.storage": frozenset({"TypedStorage", "UntypedStorage", "_load_from_bytes"}),
    "torch.serialization": frozenset({"_get_layout"}),
    "numpy": frozenset({"dtype", "ndarray"}),
    "numpy.core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy._core.multiarray": frozenset({"_reconstruct", "scalar"}),
}
_TORCH_DTYPE_RE = re.compile(r"^(u?int\d+|float\d+(_\w+)?|bfloat16|half|double|bool|complex\d+|bcomplex\d+|q?u?int\d+(x\d+)?|bits\w+)$")


def _picklescan_tables() -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """picklescan's (safe, unsafe) tables, each name a set (picklescan writes a lone name as a string).

    They are private in picklescan: tests/findings/test_picklescan_tables.py fails if a release
    renames or empties them, rather than the merge silently adding nothing.
    """
    from picklescan import scanner

    def normal(table: Mapping[str, Any]) -> dict[str, frozenset[str] | str]:
        return {module: names if names == "*" else frozenset([names] if isinstance(names, str) else names)
                for module, names in table.items()}

    return normal(getattr(scanner, "_safe_globals", {})), normal(getattr(scanner, "_unsafe_globals", {}))


_PS_SAFE, _PS_UNSAFE = _picklescan_tables()


def _matches(table: Mapping[str, Any], module: str, name: str, *, parents: bool) -> bool:
    names = table.get(module)
    if names is not None and (names == "*" or name in names or name.split(".")[0] in names):
        return True
    if parents:
        parts = module.split(".")
        return any(table.get(".".join(parts[:i])) == "*" for i in range(1, len(parts)))
    return False


# joblib's array wrappers: every joblib file with a NumPy array imports one. They read the
# array bytes that follow in the file, which is not running code, so they are not "dangerous"
# (the rest of joblib is); they are not tensor rebuilding either.
_NOT_DANGEROUS = {"joblib.numpy_pickle": frozenset({"NumpyArrayWrapper", "NDArrayWrapper", "ZNDArrayWrapper"}),
                  "sklearn.externals.joblib.numpy_pickle": frozenset({"NumpyArrayWrapper", "NDArrayWrapper"})}


def classify_global(module: str, name: str) -> str:
    """``"dangerous"``, ``"safe"`` or ``"unknown"`` for one pickle global."""
    if UNKNOWN in (module, name) or name.startswith(UNKNOWN):
        return "dangerous"  # hidden from static analysis: assume the worst
    if name in _NOT_DANGEROUS.get(module, ()):
        return "unknown"
    if _matches(_DANGEROUS, module, name, parents=True) or _matches(_PS_UNSAFE, module, name, parents=True):
        return "dangerous"
    if _matches(_SAFE, module, name, parents=False) or _matches(_PS_SAFE, module, name, parents=False):
        return "safe"
    if module in ("torch", "torch.cuda", "torch.sparse", "torch.cuda.sparse") and (
        name.endswith("Storage") or name.endswith("Tensor") or _TORCH_DTYPE_RE.match(name)
    ):
        return "safe"
    if module == "torch._utils" and name.startswith("_rebuild_"):
        return "safe"
    if module.startswith("numpy.dtypes") and name.endswith("DType"):
        return "safe"
    return "unknown"


# ---------------------------------------------------------------------------- helpers


def is_weight_file(path: str) -> bool:
    return path.lower().endswith(WEIGHT_EXTENSIONS)


def is_pickle_file(path: str) -> bool:
    """A name a loader unpickles, in any case: ``pytorch_model.BIN`` is ``pytorch_model.bin``."""
    return path.lower().endswith(PICKLE_EXTENSIONS)


def is_openvino_blob(path: str, has_file: Callable[[str], bool]) -> bool:
    """``X.bin`` beside an OpenVINO IR ``X.xml`` (``openvino_model.xml``, ``openvino/*.xml``): raw tensor bytes."""
    lower = path.lower()
    if not lower.endswith(".bin"):
        return False
    top, name = path.split("/", 1)[0], posixpath.basename(lower)
    return (name.startswith("openvino") or top == "openvino") and has_file(path[:-4] + ".xml")


def pickle_kind(path: str, entry: FileEntry | None = None, *,
                has_file: Callable[[str], bool] | None = None) -> str | None:
    """How a file is scanned for a pickle: ``"pickle"`` (its name says so), ``"container"``
    (``.npy``/``.npz``/``.zip``: only if it holds one), ``"content"`` (an LFS file of another
    name, judged by its bytes alone) or None (never scanned).

    An OpenVINO weights blob (``openvino_model.bin`` beside its ``openvino_model.xml``, known
    when ``has_file`` answers for the same revision) is raw tensor bytes under a pickle's
    extension: it is judged by content, so it is no finding unless its bytes are a pickle."""
    lower = path.lower()
    if has_file is not None and is_openvino_blob(path, has_file):
        return "content"
    if lower.endswith(PICKLE_EXTENSIONS):
        return "pickle"
    if lower.endswith(PICKLE_CONTAINER_EXTENSIONS):
        return "container"
    if lower.endswith(CONTENT_EXTENSIONS):
        return "content"
    if entry is not None and entry.is_lfs and not lower.endswith(PICKLE_FREE_EXTENSIONS):
        return "content"
    return None


def default_loader_unpickles(path: str, kind: str) -> bool:
    """Whether a loader unpickles this file with its default settings: torch.load, joblib, pickle and
    gensim do; NumPy refuses object arrays unless ``allow_pickle=True``; a file of another name is
    loaded by nothing that unpickles it by default."""
    return kind == "pickle" or path.lower().endswith(CONTENT_EXTENSIONS)


def scan_options(path: str, kind: str) -> dict[str, Any]:
    """Keyword arguments of :func:`~tracker.core.findings.picklescan_zip.scan_checkpoint` for a file of ``kind``.

    A name a loader unpickles must hold a pickle; one a loader decompresses first (joblib by magic
    number, pandas by suffix) is decompressed; a file judged by content alone, under a name no
    default loader unpickles, is read no further than :data:`MAX_CONTENT_SNIFF_BYTES`.
    """
    lower = path.lower()
    decompress = lower.endswith(COMPRESSED_PICKLE_EXTENSIONS) or ".joblib" in posixpath.basename(lower)
    limit = MAX_CONTENT_SNIFF_BYTES if kind == "content" and not lower.endswith(CONTENT_EXTENSIONS) else MAX_LEGACY_BYTES
    return {"expect_pickle": kind == "pickle", "max_raw_bytes": limit, "decompress": decompress}


def is_index_file(path: str) -> bool:
    return path.lower().endswith(INDEX_SUFFIXES)


def checkpoint_key(path: str) -> str:
    """Which checkpoint a safetensors file belongs to: its path without shard suffix.

    ``model-00001-of-00002.safetensors`` and ``model-00002-of-00002.safetensors``
    → ``model``; ``unet/diffusion_pytorch_model.fp16.safetensors`` →
    ``unet/diffusion_pytorch_model.fp16``.
    """
    directory, base = posixpath.split(path)
    m = SHARD_RE.match(base)
    stem = m.group("stem") if m else base.rsplit(".", 1)[0]
    return posixpath.join(directory, stem) if directory else stem


def _size(n: int) -> str:
    return f"{n:,} bytes"


def _short(h: str | None) -> str:
    return (h or "?")[:12]


def _names(items: Iterable[str]) -> list[str]:
    return sorted(items)[:MAX_LISTED]


def _preview(items: list[str], k: int = 3) -> str:
    shown = ", ".join(items[:k])
    return shown + (f" (+{len(items) - k} more)" if len(items) > k else "")


def _tensors(header: Mapping[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]] | None:
    """``{name: (dtype, shape)}`` from a safetensors header, or None when it is malformed."""
    if not isinstance(header, Mapping):
        return None
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, Mapping):
            return None
        dtype, shape = info.get("dtype"), info.get("shape")
        if not isinstance(dtype, str) or not isinstance(shape, list):
            return None
        if len(shape) > MAX_TENSOR_DIMS or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_TENSOR_DIM for d in shape
        ):
            return None  # no real tensor; and math.prod of a million huge dims would run for hours
        out[str(name)] = (dtype, tuple(shape))
    return out


def _params(tensors: Mapping[str, tuple[str, tuple[int, ...]]]) -> int:
    """Parameters as the estimator counts them (buffers such as position_ids left out): one count everywhere."""
    from tracker.core.estimate.checkpoint import count_tensors

    return count_tensors((name, dtype, shape) for name, (dtype, shape) in tensors.items())[0]


# ---------------------------------------------------------------------------- analyser


@analyser(library=None, order=80)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules, *,
            max_content_sniffs: int = MAX_CONTENT_SNIFFS) -> list[Finding]:
    """Weight-file findings; ``max_content_sniffs``: files judged by content (see :func:`content_sniffs_for`)."""
    old = change.old.by_path() if change.old is not None else {}
    new = change.new.by_path()
    baseline = change.old is None
    findings: list[Finding] = []
    checkpoints = [] if baseline else _safetensors(old, new, inputs, rules) + _ggufs(old, new, inputs, rules)
    findings += _without_explained(_file_set(old, new, baseline, rules), checkpoints, renames(old, new))
    if not baseline:
        findings += _indexes(old, new, inputs, rules)
        findings += checkpoints
    findings += _pickles(old, new, inputs, rules, max_content_sniffs)
    return findings


def _without_explained(found: list[Finding], checkpoints: list[Finding], moved: Mapping[str, str]) -> list[Finding]:
    """Drop what a measurement or a rename explains: ``file_replaced`` for a file measured as re-saved or
    converted, and ``file_added``/``file_removed`` (or shards) for a file renamed with identical bytes."""
    explained = {p for f in checkpoints if f.code in MEASURED_HARMLESS for p in f.evidence.get("files", ())}
    renamed = set(moved) | set(moved.values())
    return [f for f in found
            if not (f.code == "weights.file_replaced" and f.path in explained)
            and not (f.code in RENAME_CODES and f.path in renamed)]


def _shard_paths(files: Mapping[str, FileEntry]) -> set[str]:
    """Paths named like shards (``-00001-of-00004``), judged from names alone: no reads needed."""
    return {p for p in files if SHARD_RE.match(posixpath.basename(p))}


def _file_set(
    old: Mapping[str, FileEntry], new: Mapping[str, FileEntry], baseline: bool, rules: SeverityRules
) -> list[Finding]:
    out: list[Finding] = []
    for path in sorted(set(old) & set(new)):
        before, after = old[path], new[path]
        if not is_weight_file(path) or before.content_id == after.content_id:
            continue
        out.append(
            rules.finding(
                "weights.file_replaced",
                CATEGORY,
                f"{path} re-uploaded with new content: {_size(before.size)} → {_size(after.size)}, "
                f"sha256 {_short(before.content_id)} → {_short(after.content_id)}",
                path=path,
                before=before.content_id,
                after=after.content_id,
                evidence={"size_before": before.size, "size_after": after.size, "lfs": after.is_lfs},
            )
        )
    if baseline:
        return out  # on the first revision everything is "added": only pickles are worth a finding
    shards = _shard_paths(old) | _shard_paths(new)
    for path in sorted(set(new) - set(old)):
        if is_weight_file(path) and not is_pickle_file(path):  # new pickles get their own finding
            code = "weights.shard_added" if path in shards else "weights.file_added"
            kind = "shard" if path in shards else "weight file"
            out.append(
                rules.finding(code, CATEGORY, f"{kind} added: {path} ({_size(new[path].size)})",
                              path=path, after=new[path].content_id, evidence={"size": new[path].size})
            )
    for path in sorted(set(old) - set(new)):
        if is_weight_file(path):
            code = "weights.shard_removed" if path in shards else "weights.file_removed"
            kind = "shard" if path in shards else "weight file"
            out.append(
                rules.finding(code, CATEGORY, f"{kind} removed: {path} ({_size(old[path].size)})",
                              path=path, before=old[path].content_id, evidence={"size": old[path].size})
            )
    return out


def _load_index(inputs: RevisionInputs, side: str, path: str) -> dict[str, Any] | None | str:
    raw = inputs.text(side, path)
    if raw is None:
        return None
    if len(raw) > MAX_INDEX_BYTES:
        return f"larger than {MAX_INDEX_BYTES:,} bytes"
    try:
        data = loads_json(raw)
    except ValueError as exc:  # malformed, not UTF-8, or over a depth/size bound
        return f"not valid JSON: {exc}"
    if not isinstance(data, dict) or not isinstance(data.get("weight_map"), dict):
        return "no weight_map object"
    return data


def _indexes(
    old: Mapping[str, FileEntry], new: Mapping[str, FileEntry], inputs: RevisionInputs, rules: SeverityRules
) -> list[Finding]:
    """Compare each sharded index's weight_map: tensors gained, lost, moved; total_size."""
    out: list[Finding] = []
    for path in sorted(p for p in set(old) | set(new) if is_index_file(p)):
        a, b = old.get(path), new.get(path)
        if a is not None and b is not None and a.content_id == b.content_id:
            continue
        before = _load_index(inputs, "old", path) if a is not None else {"weight_map": {}, "metadata": {}}
        after = _load_index(inputs, "new", path) if b is not None else {"weight_map": {}, "metadata": {}}
        if isinstance(after, str) or isinstance(before, str):
            reason = after if isinstance(after, str) else before
            side = "new" if isinstance(after, str) else "old"
            out.append(rules.finding("weights.index_unreadable", CATEGORY, f"{path} ({side}) unreadable: {reason}",
                                     path=path, evidence={"side": side, "reason": reason}))
            continue
        if before is None or after is None:
            continue  # it could not be read; the reader recorded why
        wa, wb = before["weight_map"], after["weight_map"]
        added = sorted(set(wb) - set(wa))
        removed = sorted(set(wa) - set(wb))
        moved = sorted(k for k in set(wa) & set(wb) if wa[k] != wb[k])
        size_a = (before.get("metadata") or {}).get("total_size")
        size_b = (after.get("metadata") or {}).get("total_size")
        if not (added or removed or moved) and size_a == size_b:
            continue
        parts = []
        if added:
            parts.append(f"{len(added)} tensors added")
        if removed:
            parts.append(f"{len(removed)} removed")
        if moved:
            parts.append(f"{len(moved)} moved between shards")
        if size_a != size_b:
            parts.append(f"total_size {size_a} → {size_b}")
        # Tensors appearing in or vanishing from the map change what loads, in place; the same
        # tensors laid out over other shards (with total_size following) change nothing a user computes.
        code = "weights.index_changed" if added or removed else "weights.index_resharded"
        out.append(
            rules.finding(
                code,
                CATEGORY,
                f"{path}: " + ", ".join(parts),
                path=path,
                before={"tensors": len(wa), "shards": sorted(set(map(str, wa.values()))), "total_size": size_a},
                after={"tensors": len(wb), "shards": sorted(set(map(str, wb.values()))), "total_size": size_b},
                evidence={"added": added[:MAX_LISTED], "removed": removed[:MAX_LISTED], "moved": moved[:MAX_LISTED]},
            )
        )
    return out


def _group(files: Mapping[str, FileEntry]) -> dict[str, dict[str, FileEntry]]:
    groups: dict[str, dict[str, FileEntry]] = {}
    for path, entry in files.items():
        if path.lower().endswith(".safetensors"):
            groups.setdefault(checkpoint_key(path), {})[path] = entry
    return groups


def _merged_tensors(
    inputs: RevisionInputs, side: str, members: Mapping[str, FileEntry], rules: SeverityRules, out: list[Finding]
) -> tuple[dict[str, tuple[str, tuple[int, ...]]], dict[str, Any]] | None:
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    metadata: dict[str, Any] = {}
    inputs.want(inputs.file_key(SAFETENSORS, side, path) for path in sorted(members))
    for path in sorted(members):
        header = inputs.safetensors_header(side, path)
        if header is None:
            return None  # unreadable: the reader recorded why; the file-level finding stands
        parsed = _tensors(header)
        if parsed is None:
            out.append(rules.finding("weights.header_invalid", CATEGORY,
                                     f"{path} ({side}): safetensors header is malformed",
                                     path=path, evidence={"side": side}))
            return None
        tensors.update(parsed)
        meta = header.get("__metadata__")
        if isinstance(meta, Mapping):
            metadata[path] = dict(meta)
    return tensors, metadata


Tensors = dict[str, tuple[str, tuple[int, ...]]]  # name -> (dtype, shape)
MEASURED_HARMLESS = ("weights.resaved", "weights.dtype_changed")
"""Measured outcomes that replace ``weights.file_replaced``: the numbers a user computes with did not change."""
RENAME_CODES = ("weights.file_added", "weights.file_removed", "weights.shard_added", "weights.shard_removed")


@dataclass(frozen=True)
class _Checkpoint:
    """One safetensors checkpoint (a file or a set of shards) on both sides, with the tensors read."""

    key: str
    old: Mapping[str, FileEntry]
    new: Mapping[str, FileEntry]
    tensors_old: Tensors
    metadata_old: dict[str, Any]
    tensors_new: Tensors
    metadata_new: dict[str, Any]

    @property
    def label(self) -> str:
        return sorted(self.new)[0] if len(self.new) == 1 else f"{self.key} ({len(self.new)} shards)"

    @property
    def path(self) -> str:
        return sorted(self.new)[0] if len(self.new) == 1 else self.key


def changed_checkpoints(
    old: Mapping[str, FileEntry], new: Mapping[str, FileEntry]
) -> dict[str, tuple[dict[str, FileEntry], dict[str, FileEntry]]]:
    """The safetensors checkpoints on both sides whose files changed: ``{key: (old files, new files)}``.

    These are the checkpoints whose deltas are measured; the revision's budget is shared among them.
    """
    og, ng = _group(old), _group(new)
    return {key: (og[key], ng[key]) for key in sorted(set(og) & set(ng))
            if {p: e.content_id for p, e in og[key].items()} != {p: e.content_id for p, e in ng[key].items()}}


def _safetensors(
    old: Mapping[str, FileEntry], new: Mapping[str, FileEntry], inputs: RevisionInputs, rules: SeverityRules
) -> list[Finding]:
    out: list[Finding] = []
    changed, parts = changed_checkpoints(old, new), measured_parts(old, new)
    for key, (a, b) in changed.items():
        ra = _merged_tensors(inputs, "old", a, rules, out)
        rb = _merged_tensors(inputs, "new", b, rules, out)
        if ra is None or rb is None:
            continue
        ck = _Checkpoint(key, a, b, *ra, *rb)
        out.extend(_checkpoint_changes(rules, ck, partial(measure_checkpoint, inputs, a, b, parts)))
    return out


def changed_ggufs(old: Mapping[str, FileEntry], new: Mapping[str, FileEntry]) -> list[str]:
    """GGUF files on both sides, same path, whose content changed: measured like a checkpoint."""
    return sorted(p for p in set(old) & set(new) if p.lower().endswith(".gguf") and old[p].content_id != new[p].content_id)


def measured_parts(old: Mapping[str, FileEntry], new: Mapping[str, FileEntry]) -> int:
    """How many checkpoints of the revision share the comparison budget: changed safetensors and GGUF files."""
    return len(changed_checkpoints(old, new)) + len(changed_ggufs(old, new))


def _ggufs(
    old: Mapping[str, FileEntry], new: Mapping[str, FileEntry], inputs: RevisionInputs, rules: SeverityRules
) -> list[Finding]:
    """A replaced GGUF file whose tensors kept their names, shapes and quantization types, measured."""
    out: list[Finding] = []
    parts = measured_parts(old, new)
    for path in changed_ggufs(old, new):
        before, after = inputs.gguf_header("old", path), inputs.gguf_header("new", path)
        if before is None or after is None:
            continue
        measured = _measure_gguf(inputs, path, (before, old[path]), (after, new[path]), parts)
        if measured is None:
            continue
        ta, tb = ({n: (t["type"], tuple(t["shape"])) for n, t in h["tensors"].items()} for h in (before, after))
        ck = _Checkpoint(path, {path: old[path]}, {path: new[path]}, ta, {path: before.get("metadata")},
                         tb, {path: after.get("metadata")})
        out.extend(_measured(rules, ck, measured, sorted(n for n in ta if ta[n][0] != tb[n][0])))
    return out


def _measure_gguf(inputs: RevisionInputs, path: str, old: tuple[Mapping[str, Any], FileEntry],
                  new: tuple[Mapping[str, Any], FileEntry], parts: int) -> weight_delta.Measurement | None:
    """None when the tensor sets differ (gguf.py says how) or a quantization type changed
    (``weights.quantization_changed``): only the same tensors in the same types are compared. Measured
    once per analyser (``RevisionInputs.remembered``)."""
    return inputs.remembered(("measure_gguf", path, parts), lambda: _measure_gguf_now(inputs, path, old, new, parts))


def _measure_gguf_now(inputs: RevisionInputs, path: str, old: tuple[Mapping[str, Any], FileEntry],
                      new: tuple[Mapping[str, Any], FileEntry], parts: int) -> weight_delta.Measurement | None:
    placed_old = weight_delta.gguf_placements(old[0], path, old[1].size)
    placed_new = weight_delta.gguf_placements(new[0], path, new[1].size)
    if placed_old is None or placed_new is None or set(placed_old) != set(placed_new):
        return None
    pairs = {name: (placed_old[name], placed_new[name]) for name in placed_old}
    if not all(weight_delta.comparable(a, b) for a, b in pairs.values()):
        return None
    requests, nbytes = inputs.weight_budget()
    return weight_delta.measure(pairs, weight_delta.Budget(requests, nbytes).share(parts), inputs.read_ranges,
                                inputs.want_ranges)


def _checkpoint_changes(rules: SeverityRules, ck: _Checkpoint,
                        measure: Callable[[], weight_delta.Measurement | None] = lambda: None) -> list[Finding]:
    ta, tb = ck.tensors_old, ck.tensors_new
    added = sorted(set(tb) - set(ta))
    removed = sorted(set(ta) - set(tb))
    common = set(ta) & set(tb)
    reshaped = sorted(n for n in common if ta[n][1] != tb[n][1])
    retyped = sorted(n for n in common if ta[n][0] != tb[n][0])
    converted = all(ta[n][0] in weight_delta.FLOATS and tb[n][0] in weight_delta.FLOATS for n in retyped)
    if not (added or removed or reshaped) and converted:
        measured = measure()
        if measured is not None:
            return _measured(rules, ck, measured, retyped)
    if not (added or removed or reshaped or retyped):
        return [_resharded(rules, ck) if sorted(ck.old) != sorted(ck.new) else _values_changed(rules, ck)]
    return [*_tensor_set_changes(rules, ck, added, removed), *_tensor_kind_changes(rules, ck, reshaped, retyped),
            *_parameter_count_change(rules, ck)]


def _resharded(rules: SeverityRules, ck: _Checkpoint) -> Finding:
    # Different files, same tensors: the split changed. Whether the values also did
    # cannot be told without downloading (shard hashes are not comparable).
    tb = ck.tensors_new
    return rules.finding(
        "weights.resharded",
        CATEGORY,
        f"{ck.key}: resharded from {len(ck.old)} to {len(ck.new)} files; same {len(tb):,} tensors "
        "(names, shapes, dtypes)",
        path=ck.key,
        before=sorted(ck.old),
        after=sorted(ck.new),
        evidence={"tensors": len(tb), "parameters": _params(tb)},
    )


def _values_changed(rules: SeverityRules, ck: _Checkpoint) -> Finding:
    tb, meta_a, meta_b = ck.tensors_new, ck.metadata_old, ck.metadata_new
    dtypes = sorted({d for d, _ in tb.values()})
    return rules.finding(
        "weights.values_changed",
        CATEGORY,
        f"{ck.label}: same {len(tb):,} tensors (names, shapes, dtypes), new content: the values changed",
        path=ck.path,
        before=sorted(e.content_id for e in ck.old.values()),
        after=sorted(e.content_id for e in ck.new.values()),
        evidence={
            "tensors": len(tb),
            "parameters": _params(tb),
            "dtypes": dtypes,
            **({"metadata_before": meta_a, "metadata_after": meta_b} if meta_a != meta_b else {}),
        },
    )


def _tensor_set_changes(rules: SeverityRules, ck: _Checkpoint, added: list[str], removed: list[str]) -> list[Finding]:
    ta, tb, label, path = ck.tensors_old, ck.tensors_new, ck.label, ck.path
    out: list[Finding] = []
    if added:
        out.append(rules.finding(
            "weights.tensors_added", CATEGORY,
            f"{label}: {len(added)} tensors added: {_preview(added)}",
            path=path, after=_names(added),
            evidence={"count": len(added), "tensors": {n: {"dtype": tb[n][0], "shape": list(tb[n][1])} for n in _names(added)}},
        ))
    if removed:
        out.append(rules.finding(
            "weights.tensors_removed", CATEGORY,
            f"{label}: {len(removed)} tensors removed: {_preview(removed)}",
            path=path, before=_names(removed),
            evidence={"count": len(removed), "tensors": {n: {"dtype": ta[n][0], "shape": list(ta[n][1])} for n in _names(removed)}},
        ))
    return out


def _tensor_kind_changes(
    rules: SeverityRules, ck: _Checkpoint, reshaped: list[str], retyped: list[str]
) -> list[Finding]:
    ta, tb, label, path = ck.tensors_old, ck.tensors_new, ck.label, ck.path
    out: list[Finding] = []
    if reshaped:
        first = reshaped[0]
        out.append(rules.finding(
            "weights.tensors_reshaped", CATEGORY,
            f"{label}: {len(reshaped)} tensors reshaped, e.g. {first} {list(ta[first][1])} → {list(tb[first][1])}",
            path=path,
            before={n: list(ta[n][1]) for n in _names(reshaped)},
            after={n: list(tb[n][1]) for n in _names(reshaped)},
            evidence={"count": len(reshaped)},
        ))
    if retyped:
        first = retyped[0]
        pairs = sorted({f"{ta[n][0]} → {tb[n][0]}" for n in retyped})
        out.append(rules.finding(
            "weights.tensors_retyped", CATEGORY,
            f"{label}: {len(retyped)} tensors changed dtype ({', '.join(pairs)}), e.g. {first}",
            path=path,
            before={n: ta[n][0] for n in _names(retyped)},
            after={n: tb[n][0] for n in _names(retyped)},
            evidence={"count": len(retyped), "dtype_changes": pairs},
        ))
    return out


def _parameter_count_change(rules: SeverityRules, ck: _Checkpoint) -> list[Finding]:
    pa, pb = _params(ck.tensors_old), _params(ck.tensors_new)
    if pa == pb:
        return []
    return [rules.finding(
        "weights.parameter_count_changed", CATEGORY,
        f"{ck.label}: parameters {pa:,} → {pb:,} ({pb - pa:+,})",
        path=ck.path, before=pa, after=pb,
        evidence={"tensors_before": len(ck.tensors_old), "tensors_after": len(ck.tensors_new)},
    )]


# ---------------------------------------------------------------------------- measured deltas


def measure_checkpoint(inputs: RevisionInputs, old: Mapping[str, FileEntry], new: Mapping[str, FileEntry],
                       parts: int) -> weight_delta.Measurement | None:
    """Sampled tensors of one checkpoint compared between the revisions, within its share of the budget.

    None when the checkpoints do not hold the same tensors (names and element counts; dtypes equal or
    both floating point), when a header does not place its data exactly, or when a read fails.
    ``parts`` is how many checkpoints of the revision share the budget (:func:`changed_checkpoints`).
    Measured once per analyser, however many of its files or rounds ask (``RevisionInputs.remembered``).
    """
    return inputs.remembered(("measure_checkpoint", tuple(sorted(old)), tuple(sorted(new)), parts),
                             lambda: _measure_checkpoint(inputs, old, new, parts))


def _measure_checkpoint(inputs: RevisionInputs, old: Mapping[str, FileEntry], new: Mapping[str, FileEntry],
                        parts: int) -> weight_delta.Measurement | None:
    requests, nbytes = inputs.weight_budget()
    placed_old, placed_new = _placed(inputs, "old", old), _placed(inputs, "new", new)
    if placed_old is None or placed_new is None or set(placed_old) != set(placed_new):
        return None
    pairs = {name: (placed_old[name], placed_new[name]) for name in placed_old}
    if not all(weight_delta.comparable(a, b) for a, b in pairs.values()):
        return None
    return weight_delta.measure(pairs, weight_delta.Budget(requests, nbytes).share(parts), inputs.read_ranges,
                                inputs.want_ranges)


def _placed(inputs: RevisionInputs, side: str, members: Mapping[str, FileEntry]) -> dict[str, weight_delta.Placed] | None:
    out: dict[str, weight_delta.Placed] = {}
    inputs.want(inputs.file_key(SAFETENSORS, side, path) for path in sorted(members))
    for path, entry in sorted(members.items()):
        header = inputs.safetensors_header(side, path)
        placed = weight_delta.placements(header, path, entry.size) if header is not None else None
        if placed is None:
            return None
        out.update(placed)
    return out


def _measured(rules: SeverityRules, ck: _Checkpoint, m: weight_delta.Measurement, retyped: list[str]) -> list[Finding]:
    evidence = {"files": sorted(set(ck.old) | set(ck.new)), **m.evidence()}
    ids = {"before": sorted(e.content_id for e in ck.old.values()), "after": sorted(e.content_id for e in ck.new.values())}
    if m.identical and not retyped:
        differs = _what_differs(ck, m)
        return [rules.finding(
            "weights.resaved", CATEGORY,
            f"{ck.label}: re-saved with identical tensor values ({', '.join(differs)} changed); compared {m.coverage()}",
            path=ck.path, **ids, evidence={**evidence, "differs": differs})]
    if retyped and m.within_rounding():
        error = m.max_relative_error
        return [rules.finding(
            "weights.dtype_changed", CATEGORY,
            f"{ck.label}: converted {', '.join(m.dtype_changes)} with the same shapes; largest relative error "
            f"{error or 0:.3g}, within rounding; compared {m.coverage()}",
            path=ck.path, **ids, evidence={**evidence, "dtype_changes": list(m.dtype_changes), "tensors_retyped": len(retyped)})]
    moved = [t for t in m.most_moved() if not t.identical][:3]
    tb = ck.tensors_new
    found = [rules.finding(
        "weights.values_changed", CATEGORY,
        f"{ck.label}: the values changed: relative L2 change {_figure(m.relative_l2)} overall, "
        f"{len([t for t in m.tensors if not t.identical]):,} of {len(m.tensors):,} sampled tensors moved; most: "
        + ", ".join(f"{t.name} ({_moved(t)})" for t in moved) + f"; compared {m.coverage()}",
        path=ck.path, **ids,
        evidence={**evidence, "measured": True, "tensors": len(tb), "parameters": _params(tb),
                  "dtypes": sorted({d for d, _ in tb.values()})})]
    return found + (_tensor_kind_changes(rules, ck, [], retyped) if retyped else [])


def _moved(t: weight_delta.TensorDelta) -> str:
    """``0.0123`` (relative L2), or ``1 of 64 blocks`` for a tensor compared as bytes only."""
    return _figure(t.relative_l2) if t.decoded else f"{t.changed:,} of {t.compared:,} blocks"


def _figure(value: float) -> str:
    return "inf" if value == float("inf") else f"{value:.3g}"


def _distinct(metadata: Mapping[str, Any]) -> list[str]:
    return sorted({json.dumps(value, sort_keys=True, default=str) for value in metadata.values()})


def _what_differs(ck: _Checkpoint, m: weight_delta.Measurement) -> list[str]:
    differs = []
    if _distinct(ck.metadata_old) != _distinct(ck.metadata_new):  # per file: shards repeat the same metadata
        differs.append("header metadata")
    if m.order_changed:
        differs.append("tensor order")
    if sorted(ck.old) != sorted(ck.new):
        differs.append(f"sharding ({len(ck.old)} → {len(ck.new)} files)")
    return differs or ["header bytes"]


def measure_path(change: RevisionChange, inputs: RevisionInputs, path: str) -> weight_delta.Measurement | None:
    """The measured delta of the checkpoint a changed ``.safetensors`` or ``.gguf`` file belongs to, as the weights
    analyser measured it (the same plan, so the reads come from the sources' cache); None when not measured."""
    old, new = (change.old.by_path() if change.old is not None else {}), change.new.by_path()
    parts = measured_parts(old, new)
    if path.lower().endswith(".gguf") and path in changed_ggufs(old, new):
        before, after = inputs.gguf_header("old", path), inputs.gguf_header("new", path)
        if before is None or after is None:
            return None
        return _measure_gguf(inputs, path, (before, old[path]), (after, new[path]), parts)
    changed = changed_checkpoints(old, new)
    key = checkpoint_key(path) if path.lower().endswith(".safetensors") else None
    return measure_checkpoint(inputs, *changed[key], parts) if key is not None and key in changed else None


def measured_resave(change: RevisionChange, inputs: RevisionInputs, path: str) -> bool:
    """Whether a re-uploaded weight file was measured to hold the very same tensor values (``weights.resaved``)."""
    measured = measure_path(change, inputs, path)
    return measured is not None and measured.identical and not measured.dtype_changes


def embedding_cause(change: RevisionChange, inputs: RevisionInputs, path: str) -> tuple[str, dict[str, Any]] | None:
    """Why a changed weight file of an embedding model makes stored vectors stale, with the measurement as
    evidence; None when the measured change is within numeric noise (:data:`weight_delta.EMBEDDING_NOISE_L2`).

    The one link from weights to ``embeddings.incompatible``: a file that is not measured (a pickle, another
    structure, no budget left) is a cause by its new hash alone.
    """
    measured = measure_path(change, inputs, path)
    if measured is None:
        return f"{path} re-uploaded", {}
    if not weight_delta.moves_embeddings(measured):
        return None
    return (f"{path} values changed: relative L2 change up to {_figure(measured.largest_relative_l2)} per tensor, "
            f"beyond numeric noise ({weight_delta.EMBEDDING_NOISE_L2:g})", measured.evidence())


def _pickles(
    old: Mapping[str, FileEntry], new: Mapping[str, FileEntry], inputs: RevisionInputs, rules: SeverityRules,
    max_content_sniffs: int = MAX_CONTENT_SNIFFS,
) -> list[Finding]:
    out: list[Finding] = []
    sniffed = 0
    unjudged: list[str] = []
    kinds = {path: pickle_kind(path, entry, has_file=new.__contains__) for path, entry in new.items()}
    # Files a loader unpickles by name first, those judged by content last: the revision's request
    # budget is spent on the files a default loader would open before the speculative ones.
    for path in sorted((p for p, k in kinds.items() if k is not None), key=lambda p: (kinds[p] == "content", p)):
        entry = new[path]
        kind = kinds[path]
        assert kind is not None
        before = old.get(path)
        if before is not None and before.content_id == entry.content_id:
            continue
        if kind == "content":
            sniffed += 1
            if sniffed > max_content_sniffs:
                unjudged.append(path)
                continue
        finding = _pickle_finding(rules, inputs, path, entry, kind=kind, added=before is None)
        if finding is not None:
            out.append(finding)
    return out + _not_scanned(rules, new, unjudged, max_content_sniffs)


def _not_scanned(rules: SeverityRules, new: Mapping[str, FileEntry], paths: list[str], cap: int) -> list[Finding]:
    """``weights.not_scanned`` for the files judged by content past the per-revision cap: one each for the
    first :data:`MAX_LISTED`, then one for the rest (a revision of 100,000 blobs makes 51 findings)."""
    why = f"past the first {cap} files judged by content in this revision, as many as its request budget allows"
    out = [rules.finding(
        "weights.not_scanned", CATEGORY,
        f"{path} ({_size(new[path].size)}) was not checked for a pickle: {why}",
        path=path, after=new[path].content_id, evidence={"size": new[path].size, "reason": why},
    ) for path in paths[:MAX_LISTED]]
    rest = paths[MAX_LISTED:]
    if rest:
        out.append(rules.finding(
            "weights.not_scanned", CATEGORY,
            f"{len(rest):,} more files were not checked for a pickle, e.g. {_preview(rest)}: {why}",
            evidence={"count": len(rest), "paths": rest[:MAX_LISTED], "reason": why},
        ))
    return out


def _pickle_finding(
    rules: SeverityRules, inputs: RevisionInputs, path: str, entry: FileEntry, *, kind: str, added: bool
) -> Finding | None:
    """What a new or replaced pickle-bearing file would import when loaded, if worth saying."""
    globals_ = inputs.pickle_globals("new", path)
    if globals_ is not None and not getattr(globals_, "holds_pickle", True):
        return None  # a numeric array, an archive without pickles: nothing to unpickle
    ambiguous: str | None = getattr(globals_, "ambiguous", None)
    if kind == "content" and not globals_ and not ambiguous:
        return None  # not a pickle, or one that imports nothing: no code can run
    verb = "added" if added else "replaced"
    if globals_ is None:
        return rules.finding(
            "weights.pickle_unscanned", CATEGORY,
            f"pickle-based file {verb}: {path} ({_size(entry.size)}); its imports could not be scanned",
            path=path, after=entry.content_id, evidence={"added": added, "size": entry.size},
        )
    classes = {f"{m}.{n}": classify_global(m, n) for m, n in globals_}
    dangerous = sorted(g for g, c in classes.items() if c == "dangerous")
    incomplete: str | None = getattr(globals_, "incomplete", None)
    evidence: dict[str, Any] = {"added": added, "size": entry.size, "globals": dict(sorted(classes.items()))}
    partly = ""
    if incomplete:
        evidence["unscanned"] = incomplete
        partly = f" (partly scanned: {incomplete})"
    if ambiguous:
        evidence["ambiguous"] = ambiguous
        partly += f" (readers could read it otherwise: {ambiguous})"
    if dangerous:
        return rules.finding(
            "weights.pickle_dangerous_import", CATEGORY,
            f"pickle-based file {verb}: {path} would import {_preview(dangerous)} when loaded{partly}",
            path=path, after=dangerous, evidence=evidence,
        )
    if ambiguous:
        return _ambiguous(rules, path, entry, evidence, verb=verb, critical=default_loader_unpickles(path, kind))
    return _harmless_or_unknown(rules, inputs, path, entry, classes=classes, evidence=evidence, verb=verb,
                                partly=partly)


def _ambiguous(rules: SeverityRules, path: str, entry: FileEntry, evidence: dict[str, Any], *,
               verb: str, critical: bool) -> Finding:
    """``weights.pickle_unscanned`` for a file that loaders and scanners could read differently.

    Critical in a file a default loader unpickles (whatever the deployment's table says for the
    code, unless it set one): what this scan read is harmless, what a loader runs is not known.
    """
    finding = rules.finding(
        "weights.pickle_unscanned", CATEGORY,
        f"pickle-based file {verb}: {path} ({_size(entry.size)}); readers could read it otherwise "
        f"({evidence['ambiguous']}), so what loading it imports is not known",
        path=path, after=entry.content_id, evidence=evidence,
    )
    if critical and "weights.pickle_unscanned" not in rules.overrides:
        return replace(finding, severity=Severity.CRITICAL)
    return finding


def _harmless_or_unknown(rules: SeverityRules, inputs: RevisionInputs, path: str, entry: FileEntry, *,
                         classes: dict[str, str], evidence: dict[str, Any], verb: str, partly: str) -> Finding | None:
    """The finding for a pickle whose scan is unambiguous and imports nothing dangerous."""
    added = verb == "added"
    incomplete = evidence.get("unscanned")
    unknown = sorted(g for g, c in classes.items() if c == "unknown")
    if unknown:
        if not added and not incomplete:
            old_globals = inputs.pickle_globals("old", path)
            if old_globals is not None and set(unknown) <= {f"{m}.{n}" for m, n in old_globals}:
                return None  # same non-rebuild imports as before: file_replaced says enough
        return rules.finding(
            "weights.pickle_unknown_import", CATEGORY,
            f"pickle-based file {verb}: {path} imports {len(unknown)} globals beyond tensor rebuilding: "
            f"{_preview(unknown)}{partly}",
            path=path, after=unknown, evidence=evidence,
        )
    if incomplete:
        return rules.finding(
            "weights.pickle_unscanned", CATEGORY,
            f"pickle-based file {verb}: {path} ({_size(entry.size)}); only partly scanned ({incomplete}), "
            "the scanned part imports only tensor-rebuild globals",
            path=path, after=entry.content_id, evidence=evidence,
        )
    if added:
        return rules.finding(
            "weights.pickle_added", CATEGORY,
            f"pickle-based file added: {path} ({_size(entry.size)}); imports only tensor-rebuild globals",
            path=path, after=sorted(classes), evidence=evidence,
        )
    return None

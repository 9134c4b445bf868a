"""Serving memory of a diffusers pipeline: the bytes of each component's weights, from safetensors headers.

Pure: works on headers already parsed (the Hub adapter range-reads them). Only the default,
non-variant files count (``diffusion_pytorch_model.safetensors``, ``model.safetensors`` and their
shards), which is what ``DiffusionPipeline.from_pretrained`` loads without ``variant=``; the
``*.fp16.safetensors`` copies beside them are not what a default load serves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tracker.core.estimate.checkpoint import ImplausibleHeader, tensor_shape

# Bits per element of each safetensors dtype.
DTYPE_BITS = {"F64": 64, "I64": 64, "U64": 64, "F32": 32, "I32": 32, "U32": 32, "F16": 16, "BF16": 16,
              "I16": 16, "U16": 16, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "I8": 8, "U8": 8, "BOOL": 8,
              "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
MAX_FILES_PER_COMPONENT = 256  # the largest real pipelines ship a few dozen shards per component


def is_default_weights(path: str, component: str) -> bool:
    """A component's own non-variant safetensors file: ``<component>/<name>[-0000x-of-0000y].safetensors``."""
    folder, _, name = path.rpartition("/")
    if folder != component or not name.endswith(".safetensors"):
        return False
    return "." not in name.removesuffix(".safetensors")  # "diffusion_pytorch_model.fp16" is a variant


def header_bytes(header: Mapping[str, Any]) -> int:
    """Bytes of every tensor in one header: dtype size × shape product; ValueError on an unknown dtype."""
    total = 0
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, Mapping):
            continue
        dtype = str(info.get("dtype", "")).upper()
        if dtype not in DTYPE_BITS:
            raise ImplausibleHeader(f"tensor {name[:100]!r} has an unknown dtype {dtype[:20]!r}")
        total += math.ceil(DTYPE_BITS[dtype] * math.prod(tensor_shape(name, info)) / 8)
    return total


def component_bytes(files: list[str], component: str, headers: Mapping[str, Mapping[str, Any] | None]) -> int | None:
    """Bytes of one component's default weights, or None when it has none or a header is missing."""
    paths = [p for p in files if is_default_weights(p, component)]
    if not paths or len(paths) > MAX_FILES_PER_COMPONENT:
        return None
    total = 0
    for path in paths:
        header = headers.get(path)
        if header is None:
            return None
        total += header_bytes(header)
    return total


def fmt_bytes(n: int) -> str:
    """Decimal units, as model cards and the Hub state sizes: ``5.11 GB``, ``16.38 kB``, ``128 B``."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"

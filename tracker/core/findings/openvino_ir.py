"""An OpenVINO IR's inputs and outputs (``openvino_model.xml``): its Parameter and Result layers with shapes.

The IR is XML: ``<net><layers><layer type="Parameter" name=...><data shape="?,?" element_type="i64"/>``
for each input, ``<layer type="Result">`` whose input port's ``<dim>`` elements give each output's
shape. It is parsed by defusedxml's ``iterparse`` (no DTD, no entities, no external references:
a billion-laughs file is refused, not expanded) with the depth and element count capped; the
bytes are capped by the caller. Pure.
"""

from __future__ import annotations

import io
from typing import Any
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

MAX_BYTES = 32 * 1024 * 1024  # a large LLM's IR is a few MB of layers
MAX_DEPTH = 32  # the IR nests net/layers/layer/output/port/dim (rt_info a little deeper)
MAX_ELEMENTS = 2_000_000
MAX_IOS = 1000
MAX_DIMS = 64
MAX_ATTRIBUTE_CHARS = 4096  # a Parameter's shape of 64 dimensions is a few hundred characters
MAX_ATTRIBUTES = 64


class OpenVinoError(ValueError):
    """Not a well-formed OpenVINO IR within the bounds; the message says why."""


def read_ir(data: bytes) -> dict[str, Any]:
    """``{"inputs": [{"name", "type", "shape"}], "outputs": [{"name", "type", "shape"}]}`` in layer order."""
    reader = _IrReader()
    try:
        for event, elem in iterparse(io.BytesIO(data), events=("start", "end"),
                                     forbid_dtd=True, forbid_entities=True, forbid_external=True):
            if event == "start":
                reader.start(elem)
            else:
                reader.end(elem)
    except (ParseError, DefusedXmlException) as exc:
        raise OpenVinoError(f"not well-formed XML: {type(exc).__name__}: {exc}") from None
    if not reader.root_seen:
        raise OpenVinoError("no <net> element")
    return {"inputs": reader.inputs, "outputs": reader.outputs}


class _IrReader:
    """What the streamed elements have shown so far: the Parameter and Result layers, with their ports."""

    def __init__(self) -> None:
        self.inputs: list[dict[str, Any]] = []
        self.outputs: list[dict[str, Any]] = []
        self.depth = self.elements = 0
        self.layer: dict[str, Any] | None = None
        self.in_port: str | None = None  # "input" or "output" while inside a layer's port list
        self.port_dims: list[str] | None = None
        self.port_precision: str | None = None
        self.root_seen = False

    def start(self, elem: Any) -> None:
        tag = elem.tag
        self.depth += 1
        self.elements += 1
        depth, layer = self.depth, self.layer
        if depth > MAX_DEPTH:
            raise OpenVinoError(f"elements nested deeper than {MAX_DEPTH}")
        if self.elements > MAX_ELEMENTS:
            raise OpenVinoError(f"more than {MAX_ELEMENTS:,} elements")
        if depth == 1:
            if tag != "net":
                raise OpenVinoError(f"the root element is <{tag[:40]}>, not <net>")
            self.root_seen = True
        elif depth == 3 and tag == "layer":
            kind = elem.get("type")
            self.layer = {"type": kind, "name": elem.get("name", ""), "data": None, "ports": []} \
                if kind in ("Parameter", "Result") else None
        elif layer is not None and depth == 4 and tag in ("input", "output"):
            self.in_port = tag
        elif layer is not None and self.in_port and depth == 5 and tag == "port":
            self.port_dims, self.port_precision = [], elem.get("precision")

    def end(self, elem: Any) -> None:
        tag = elem.tag
        self.depth -= 1
        depth, layer = self.depth, self.layer
        if layer is not None:
            if depth == 3 and tag == "data":
                layer["data"] = _attributes(elem.attrib)
            elif depth == 5 and tag == "dim" and self.port_dims is not None:
                if len(self.port_dims) >= MAX_DIMS:
                    raise OpenVinoError(f"a port with more than {MAX_DIMS} dimensions")
                self.port_dims.append((elem.text or "").strip()[:40])
            elif depth == 4 and tag == "port" and self.port_dims is not None:
                layer["ports"].append({"side": self.in_port, "dims": self.port_dims, "precision": self.port_precision})
                self.port_dims = None
            elif depth == 3 and tag in ("input", "output"):
                self.in_port = None
            elif depth == 2 and tag == "layer":
                _finish(layer, self.inputs, self.outputs)
                self.layer = None
        if depth <= 3:
            elem.clear()  # keep memory flat on a large IR


def _attributes(attrib: dict[str, str]) -> dict[str, str]:
    """A ``<data>`` element's attributes, each checked against the length cap before anything splits it."""
    if len(attrib) > MAX_ATTRIBUTES:
        raise OpenVinoError(f"a <data> element with {len(attrib):,} attributes, over the cap of {MAX_ATTRIBUTES}")
    for name, value in attrib.items():
        if len(value) > MAX_ATTRIBUTE_CHARS:
            raise OpenVinoError(f"a {name[:40]!r} attribute of {len(value):,} characters, over the "
                                f"{MAX_ATTRIBUTE_CHARS:,}-character cap")
    return dict(attrib)


def _finish(layer: dict[str, Any], inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> None:
    target = inputs if layer["type"] == "Parameter" else outputs
    if len(target) >= MAX_IOS:
        raise OpenVinoError(f"more than {MAX_IOS:,} {'inputs' if target is inputs else 'outputs'}")
    data = layer["data"] or {}
    if layer["type"] == "Parameter":
        port = next((p for p in layer["ports"] if p["side"] == "output"), None)
        shape = data.get("shape")
        shape_list = ([d.strip()[:40] for d in shape.split(",", MAX_DIMS)[:MAX_DIMS]] if shape
                      else (port["dims"] if port else None))
        target.append({"name": layer["name"][:200], "type": data.get("element_type"),
                       "shape": shape_list[:MAX_DIMS] if shape_list is not None else None})
    else:
        port = next((p for p in layer["ports"] if p["side"] == "input"), None)
        target.append({"name": layer["name"][:200],
                       "type": (port["precision"] or "").lower() or None if port else None,
                       "shape": port["dims"] if port else None})

"""The ``/docs`` page's reading of the OpenAPI document: every operation with its parameters, request
body and responses, and every schema they name, as plain data for the template. Pure.

A type is written as a person reads it ("array of RepoOut", "string or null", "integer, 1 to
2147483647") with each schema it names linked to that schema's entry further down the page. Nothing
is fetched and no script runs: the page is the document, rendered on the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
REF_PREFIX = "#/components/schemas/"
DEPTH = 6  # nested types written out this deep; deeper is "…"


@dataclass(frozen=True)
class Part:
    """A piece of a type: text, linked to a schema's entry when ``schema`` is set."""

    text: str
    schema: str = ""

    @property
    def href(self) -> str:
        return "#" + schema_anchor(self.schema) if self.schema else ""


@dataclass(frozen=True)
class Field:
    """A parameter or a schema property."""

    name: str
    where: str  # path, query, header, cookie; "" for a property
    required: bool
    type: tuple[Part, ...]
    description: str


@dataclass(frozen=True)
class Body:
    """A request or response body: its status (responses), what it means, its media type and shape."""

    status: str
    description: str
    media_type: str
    type: tuple[Part, ...]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    anchor: str
    summary: str
    description: str  # Markdown, as written in the document
    secured: bool
    parameters: tuple[Field, ...]
    request: Body | None
    responses: tuple[Body, ...]


@dataclass(frozen=True)
class Schema:
    name: str
    anchor: str
    description: str
    type: tuple[Part, ...]  # what it is when it is not an object of properties
    fields: tuple[Field, ...]


def schema_anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


def _operation_anchor(method: str, path: str) -> str:
    return "op-" + method + "-" + (re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-") or "root")


def _join(parts: Sequence[tuple[Part, ...]], word: str) -> tuple[Part, ...]:
    out: list[Part] = []
    for i, p in enumerate(parts):
        if i:
            out.append(Part(f" {word} "))
        out.extend(p)
    return tuple(out)


def _constraints(schema: Mapping[str, Any]) -> str:
    """The limits a value keeps, in words: "1 to 100", "at most 96 characters", "matching ^[a-z]+$"."""
    said = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        said.append(f"{low} to {high}")
    elif low is not None:
        said.append(f"at least {low}")
    elif high is not None:
        said.append(f"at most {high}")
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if lo is not None and hi is not None:
        said.append(f"{lo} to {hi} characters")
    elif hi is not None:
        said.append(f"at most {hi} characters")
    elif lo is not None:
        said.append(f"at least {lo} characters")
    if "pattern" in schema:
        said.append(f"matching {schema['pattern']}")
    if "enum" in schema:
        said.append("one of " + ", ".join(map(str, schema["enum"])))
    if "default" in schema and schema["default"] not in (None, [], {}):
        default = schema["default"]
        said.append(f"default {default if isinstance(default, str) else json.dumps(default)}")
    return ", ".join(said)


def type_of(schema: Any, depth: int = 0) -> tuple[Part, ...]:
    """A schema as a person reads its type, each named schema a link."""
    if depth > DEPTH:
        return (Part("…"),)
    if not isinstance(schema, Mapping) or not schema:
        return (Part("any JSON"),)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(REF_PREFIX):
        name = ref[len(REF_PREFIX):]
        return (Part(name, name),)
    for key, word in (("anyOf", "or"), ("oneOf", "or"), ("allOf", "and")):
        if isinstance(schema.get(key), list):
            return _join([type_of(s, depth + 1) for s in schema[key]], word)
    kind = schema.get("type")
    if kind == "array":
        base: tuple[Part, ...] = (Part("array of "), *type_of(schema.get("items"), depth + 1))
    elif kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        base = (Part("object of string → "), *type_of(schema["additionalProperties"], depth + 1))
    elif isinstance(kind, str):
        base = (Part({"null": "null"}.get(kind, kind)),)
    else:
        base = (Part("object") if "properties" in schema else Part("any JSON"),)
    said = _constraints(schema)
    return (*base, Part(f" ({said})")) if said else base


def _parameter(p: Mapping[str, Any]) -> Field:
    schema = p.get("schema") or {}
    return Field(name=str(p.get("name") or ""), where=str(p.get("in") or ""), required=bool(p.get("required")),
                 type=type_of(schema), description=str(p.get("description") or schema.get("description") or ""))


def _body(status: str, spec: Mapping[str, Any]) -> Body:
    content = spec.get("content") or {}
    media_type, media = next(iter(content.items()), ("", None))
    schema = media.get("schema") if isinstance(media, Mapping) else None
    return Body(status=status, description=str(spec.get("description") or ""), media_type=str(media_type),
                type=type_of(schema) if media_type else ())


def _operation(path: str, method: str, op: Mapping[str, Any]) -> Operation:
    request = op.get("requestBody")
    return Operation(
        method=method.upper(), path=path, anchor=_operation_anchor(method, path),
        summary=str(op.get("summary") or ""), description=str(op.get("description") or "").strip(),
        secured=bool(op.get("security")),
        parameters=tuple(_parameter(p) for p in op.get("parameters") or [] if isinstance(p, Mapping)),
        request=_body("", request) if isinstance(request, Mapping) else None,
        responses=tuple(_body(str(code), spec) for code, spec in sorted((op.get("responses") or {}).items())
                        if isinstance(spec, Mapping)))


def operations(document: Mapping[str, Any]) -> list[Operation]:
    """Every operation of the document, in its order (paths as written, methods as HTTP lists them)."""
    out = []
    for path, item in (document.get("paths") or {}).items():
        if not isinstance(item, Mapping):
            continue
        out += [_operation(str(path), m, item[m]) for m in METHODS if isinstance(item.get(m), Mapping)]
    return out


def schemas(document: Mapping[str, Any]) -> list[Schema]:
    """The document's named schemas, by name: each property with its type and whether it is required."""
    out = []
    named = ((document.get("components") or {}).get("schemas") or {})
    for name in sorted(named):
        schema = named[name]
        if not isinstance(schema, Mapping):
            continue
        required = set(schema.get("required") or [])
        fields = tuple(Field(name=str(k), where="", required=k in required, type=type_of(v),
                             description=str(v.get("description") or "") if isinstance(v, Mapping) else "")
                       for k, v in (schema.get("properties") or {}).items())
        out.append(Schema(name=str(name), anchor=schema_anchor(str(name)),
                          description=str(schema.get("description") or "").strip(),
                          type=() if fields else type_of(schema), fields=fields))
    return out

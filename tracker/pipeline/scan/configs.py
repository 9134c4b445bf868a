"""Hub model references in YAML, JSON and TOML config files. Contains no I/O.

A reference is a mapping key naming a model (``model``, ``model_name_or_path``,
``model_id``, ``pretrained_model_name_or_path``, ``tokenizer_name``, ...; keys
match without regard to case, so ``MODEL_ID`` in a compose file's
``environment`` counts) whose value is an ``owner/name`` Hub id. Its revision
is a sibling key in the same mapping: ``<key>_revision``, then
``model_revision`` (``tokenizer_revision`` for tokenizers,
``base_model_revision``/``revision_of_model`` for base models), then
``revision``.

YAML is composed (never constructed: no tag runs code, aliases are walked
once) and its nodes carry exact positions. ``json`` and ``tomllib`` give
none, so each value found is placed by searching the text for its own
``key: "value"`` (JSON) or ``key = "value"`` (TOML) occurrence.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from tracker.core.errors import first_line
from tracker.core.model import RepoId
from tracker.pipeline.scan.python import as_repo_id
from tracker.pipeline.scan.text import LineIndex

MODEL_KEYS = frozenset({
    "model", "model_id", "model_name", "model_name_or_path", "pretrained_model_name_or_path", "model_repo",
    "hf_model", "hf_model_id", "base_model", "base_model_name_or_path", "tokenizer", "tokenizer_name",
    "tokenizer_name_or_path",
})
# Every model key contains one of these: files without them are not parsed at all.
TRIGGERS = (b"model", b"tokenizer")

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YAML_NULL = "tag:yaml.org,2002:null"


@dataclass(frozen=True)
class ConfigReference:
    line: int  # 1-based
    column: int | None  # 1-based, in characters, at the value (its opening quote when quoted)
    repo: RepoId
    ref: str | None
    key: str


class ConfigFileError(ValueError):
    """The file does not parse as what its extension says."""


def revision_keys(key: str) -> list[str]:
    """Sibling keys that hold the revision for a model key, most specific first (lower case)."""
    key = key.lower()
    keys = [f"{key}_revision"]
    if key.startswith("base_model"):
        keys += ["base_model_revision", "revision_of_model"]
    if key.startswith("tokenizer"):
        keys += ["tokenizer_revision"]
    keys += ["model_revision", "revision"]
    return list(dict.fromkeys(keys))


def mentions_models(data: bytes) -> bool:
    lowered = data.lower()
    return any(trigger in lowered for trigger in TRIGGERS)


# -- YAML -----------------------------------------------------------------------------------------


def find_in_yaml(text: str, is_local_path: Callable[[str], bool]) -> list[ConfigReference]:
    try:
        documents = list(yaml.compose_all(text, Loader=_YAML_LOADER))
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"not valid YAML: {first_line(exc)}") from exc
    found: list[ConfigReference] = []
    seen: set[int] = set()
    for document in documents:
        if document is not None:
            found.extend(_walk_yaml(document, seen, is_local_path))
    return found


def _walk_yaml(root: yaml.Node, seen: set[int], is_local_path: Callable[[str], bool]) -> Iterator[ConfigReference]:
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: walked once, so recursive or exponential documents stay cheap
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            siblings = {k.value.lower(): v for k, v in node.value if isinstance(k, yaml.ScalarNode)
                        and isinstance(k.value, str)}
            for key_node, value_node in node.value:
                if (isinstance(key_node, yaml.ScalarNode) and isinstance(value_node, yaml.ScalarNode)
                        and str(key_node.value).lower() in MODEL_KEYS):
                    repo = as_repo_id(str(value_node.value), is_local_path)
                    if repo is not None:
                        ref = _yaml_revision(siblings, str(key_node.value))
                        mark = value_node.start_mark
                        found = ConfigReference(line=mark.line + 1, column=mark.column + 1, repo=repo, ref=ref,
                                                key=str(key_node.value))
                        yield found
            stack.extend(reversed([v for _, v in node.value]))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))


def _yaml_revision(siblings: Mapping[str, yaml.Node], key: str) -> str | None:
    for name in revision_keys(key):
        node = siblings.get(name)
        if isinstance(node, yaml.ScalarNode):
            return None if node.tag == _YAML_NULL else (str(node.value).strip() or None)
    return None


# -- JSON and TOML --------------------------------------------------------------------------------


def find_in_json(text: str, is_local_path: Callable[[str], bool]) -> list[ConfigReference]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigFileError(f"not valid JSON: {first_line(exc)}") from exc
    return _place(text, _walk_data(data, is_local_path), _json_pattern)


def find_in_toml(text: str, is_local_path: Callable[[str], bool]) -> list[ConfigReference]:
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigFileError(f"not valid TOML: {first_line(exc)}") from exc
    return _place(text, _walk_data(data, is_local_path), _toml_pattern)


def _walk_data(root: Any, is_local_path: Callable[[str], bool]) -> Iterator[tuple[str, RepoId, str | None]]:
    """(key as written, repo, revision) for each model key, in document order (pre-order, keys in order)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            siblings = {str(k).lower(): v for k, v in node.items()}
            children = []
            for key, value in node.items():
                if isinstance(value, str) and str(key).lower() in MODEL_KEYS:
                    repo = as_repo_id(value, is_local_path)
                    if repo is not None:
                        yield str(key), repo, _data_revision(siblings, str(key))
                children.append(value)
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(reversed(node))


def _data_revision(siblings: Mapping[str, Any], key: str) -> str | None:
    for name in revision_keys(key):
        if name in siblings:
            value = siblings[name]
            if value is None or isinstance(value, (dict, list)):
                return None
            return str(value).strip() or None
    return None


def _value_pattern(repo: str) -> str:
    return r"\\?/".join(re.escape(part) for part in repo.split("/"))  # JSON may write '/' as '\/'


def _json_pattern(key: str, repo: str) -> re.Pattern[str]:
    return re.compile(rf'"{re.escape(key)}"\s*:\s*(?P<value>"{_value_pattern(repo)}")')


def _toml_pattern(key: str, repo: str) -> re.Pattern[str]:
    name = re.escape(key)
    return re.compile(
        rf'(?:^|(?<=[{{,.\s]))(?:{name}|"{name}"|\'{name}\')[ \t]*=[ \t]*'
        rf'(?P<value>(?P<q>"""|\'\'\'|"|\'){_value_pattern(repo)}(?P=q))',
        re.MULTILINE,
    )


def _place(text: str, found: Iterator[tuple[str, RepoId, str | None]],
           pattern: Callable[[str, str], re.Pattern[str]]) -> list[ConfigReference]:
    """Give each (key, repo) its own occurrence in the text: the n-th found gets the n-th match."""
    index = LineIndex(text)
    matches: dict[tuple[str, str], list[re.Match[str]]] = {}
    used: dict[tuple[str, str], int] = {}
    out = []
    for key, repo, ref in found:
        pair = (key, repo)
        if pair not in matches:
            matches[pair] = list(pattern(key, repo).finditer(text))
        n = used.get(pair, 0)
        used[pair] = n + 1
        if n < len(matches[pair]):
            start = matches[pair][n].start("value")
            out.append(ConfigReference(line=index.line_of(start), column=index.column_of(start) + 1, repo=repo,
                                       ref=ref, key=key))
        else:  # written in a way the search does not know (escapes, a multi-line key): the file, no column
            out.append(ConfigReference(line=1, column=None, repo=repo, ref=ref, key=key))
    return out



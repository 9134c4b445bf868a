"""Hub model references in Python source, found by parsing it with ``ast``; the code is never run.

A reference is a call that loads a model from the Hub (``from_pretrained``,
``hf_hub_download``, ``snapshot_download``, ``hf_hub_url``, ``pipeline``,
``SentenceTransformer``, ``CrossEncoder``, ``SparseEncoder``) whose repo id
can be read from the source alone: a string literal, or a name bound exactly
once to one in the same module (a module-level constant, or a constant local
to the enclosing function), or an f-string or ``+`` of those. The
``revision=`` argument is read the same way. Contains no I/O.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tracker.core.model import RepoId, validate_repo_id

# Resolution gives a str, None (an explicit ``None``) or UNKNOWN (needs running the code).
UNKNOWN = object()
_MAX_DEPTH = 20  # constant chains (A = B; B = "x/y") followed this far


@dataclass(frozen=True)
class CallSpec:
    """Where a loading call takes its repo id: keyword names, then a positional index."""

    keywords: tuple[str, ...]
    position: int | None
    method: bool = False  # only as an attribute (``X.from_pretrained``), never a bare name
    repo_type: bool = False  # takes ``repo_type=``: only model repos count


CALLS: dict[str, CallSpec] = {
    "from_pretrained": CallSpec(("pretrained_model_name_or_path", "model_id"), 0, method=True),
    "hf_hub_download": CallSpec(("repo_id",), 0, repo_type=True),
    "snapshot_download": CallSpec(("repo_id",), 0, repo_type=True),
    "hf_hub_url": CallSpec(("repo_id",), 0, repo_type=True),
    "pipeline": CallSpec(("model",), 1),
    "SentenceTransformer": CallSpec(("model_name_or_path",), 0),
    "CrossEncoder": CallSpec(("model_name_or_path", "model_name"), 0),
    "SparseEncoder": CallSpec(("model_name_or_path",), 0),
}

# ``PeftModel.from_pretrained(base_model, adapter_id)``: the repo id is the second argument.
_PEFT_PREFIXES = ("PeftModel", "PeftMixedModel")


@dataclass(frozen=True)
class PyReference:
    """A reference in one source text: 1-based line, 0-based character column."""

    line: int
    column: int
    repo: RepoId
    ref: str | None
    via: str
    revision_expr: str | None


class Scope:
    """The names one scope binds: each binding is the assigned expression, or None (anything else)."""

    def __init__(self, parent: Scope | None) -> None:
        self.parent = parent
        self.bindings: dict[str, list[ast.expr | None]] = {}

    def bind(self, name: str, value: ast.expr | None) -> None:
        self.bindings.setdefault(name, []).append(value)


class _Binder(ast.NodeVisitor):
    """One pass over the tree: every scope's bindings, and the scope each call sits in."""

    def __init__(self) -> None:
        self.module = Scope(None)
        self.scope = self.module
        self.calls: list[tuple[ast.Call, Scope]] = []

    def _in_scope(self, scope: Scope, visit: Callable[[], None]) -> None:
        outer, self.scope = self.scope, scope
        try:
            visit()
        finally:
            self.scope = outer

    def _visit_all(self, nodes: list[ast.stmt]) -> None:
        for node in nodes:
            self.visit(node)

    def _function_parent(self) -> Scope:
        """Functions see enclosing function scopes and the module, never a class body."""
        scope = self.scope
        while isinstance(scope, _ClassScope):
            assert scope.parent is not None
            scope = scope.parent
        return scope

    def _arguments(self, scope: Scope, args: ast.arguments) -> None:
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                scope.bind(arg.arg, None)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for item in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if item is not None:
                self.visit(item)
        self.scope.bind(node.name, None)
        scope = Scope(self._function_parent())
        self._arguments(scope, node.args)
        self._in_scope(scope, lambda: self._visit_all(node.body))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for item in (*node.args.defaults, *node.args.kw_defaults):
            if item is not None:
                self.visit(item)
        scope = Scope(self._function_parent())
        self._arguments(scope, node.args)
        self._in_scope(scope, lambda: self.visit(node.body))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in (*node.decorator_list, *node.bases, *node.keywords):
            self.visit(item)
        self.scope.bind(node.name, None)
        scope = _ClassScope(self.scope)
        self._in_scope(scope, lambda: self._visit_all(node.body))

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        scope = Scope(self._function_parent())

        def body() -> None:
            for generator in node.generators:
                self.visit(generator)
            if isinstance(node, ast.DictComp):
                self.visit(node.key)
                self.visit(node.value)
            else:
                self.visit(node.elt)

        self._in_scope(scope, body)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:  # some function may rebind it: no longer a constant, there or here
            self.module.bind(name, None)
            self.scope.bind(name, None)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        for name in node.names:
            self.scope.bind(name, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._assign(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return  # a declaration binds nothing
        self.visit(node.value)
        self._assign(node.target, node.value)

    def _assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.scope.bind(target.id, value)
        elif (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
              and len(target.elts) == len(value.elts)
              and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))):
            for sub_target, sub_value in zip(target.elts, value.elts):
                self._assign(sub_target, sub_value)
        else:
            self.visit(target)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.scope.bind(node.id, None)

    def _bind_alias(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            if name != "*":
                self.scope.bind(name, None)

    visit_Import = visit_ImportFrom = _bind_alias

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.scope.bind(node.name, None)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.scope.bind(node.name, None)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.scope.bind(node.name, None)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.scope.bind(node.rest, None)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self.calls.append((node, self.scope))
        self.generic_visit(node)


class _ClassScope(Scope):
    """A class body: visible to itself, not to the methods defined in it."""


def _lookup(name: str, scope: Scope | None) -> tuple[ast.expr, Scope] | None:
    """The one expression ``name`` is bound to, seen from ``scope``; None unless exactly one."""
    while scope is not None:
        if name in scope.bindings:
            bound = scope.bindings[name]
            value = bound[0] if len(bound) == 1 else None
            return (value, scope) if value is not None else None
        scope = scope.parent
    return None  # a builtin, a star import, or nothing at all


def resolve(node: ast.expr, scope: Scope, *, depth: int = 0) -> object:
    """The value of ``node`` when it is knowable without running the code: a str, None, or UNKNOWN."""
    if depth > _MAX_DEPTH:
        return UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) or node.value is None else UNKNOWN
    if isinstance(node, ast.Name):
        found = _lookup(node.id, scope)
        if found is None:
            return UNKNOWN
        value, where = found
        return resolve(value, where, depth=depth + 1)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                if part.conversion != -1 or part.format_spec is not None:
                    return UNKNOWN
                part_value = resolve(part.value, scope, depth=depth + 1)
            else:
                part_value = resolve(part, scope, depth=depth + 1)
            if not isinstance(part_value, str):
                return UNKNOWN
            parts.append(part_value)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = resolve(node.left, scope, depth=depth + 1)
        right = resolve(node.right, scope, depth=depth + 1)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    return UNKNOWN


def _callee(func: ast.expr) -> tuple[str | None, str | None, str]:
    """(called name, receiver name, dotted text): ``AutoModel.from_pretrained`` gives the three."""
    if isinstance(func, ast.Name):
        return func.id, None, func.id
    if isinstance(func, ast.Attribute):
        receiver = func.value
        receiver_name = (receiver.id if isinstance(receiver, ast.Name)
                         else receiver.attr if isinstance(receiver, ast.Attribute) else None)
        text = f"{receiver_name}.{func.attr}" if receiver_name else func.attr
        return func.attr, receiver_name, text
    return None, None, ""


def _argument(call: ast.Call, keywords: tuple[str, ...], position: int | None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg in keywords:
            return keyword.value
    if position is not None and len(call.args) > position:
        if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
            return None
        return call.args[position]
    return None


def find_in_tree(tree: ast.AST, is_local_path: Callable[[str], bool] = lambda _: False) -> Iterator[PyReference]:
    """Every model reference in a parsed module, in source order; columns are UTF-8 byte offsets."""
    binder = _Binder()
    binder.visit(tree)
    for call, scope in binder.calls:
        name, receiver, text = _callee(call.func)
        spec = CALLS.get(name or "")
        if spec is None or (spec.method and not isinstance(call.func, ast.Attribute)):
            continue
        position = spec.position
        if name == "from_pretrained" and receiver and receiver.startswith(_PEFT_PREFIXES):
            position = 1
        repo_node = _argument(call, spec.keywords, position)
        if repo_node is None:
            continue
        if spec.repo_type:
            repo_type_node = _argument(call, ("repo_type",), None)
            if repo_type_node is not None and resolve(repo_type_node, scope) not in (
                    None, "model"):
                continue
        repo = resolve(repo_node, scope)
        if not isinstance(repo, str):
            continue
        repo_id = as_repo_id(repo, is_local_path)
        if repo_id is None:
            continue
        ref: str | None = None
        revision_expr = None
        revision_node = _argument(call, ("revision",), None)
        if revision_node is not None:
            value = resolve(revision_node, scope)
            if isinstance(value, str):
                ref = value.strip() or None
            elif value is UNKNOWN:
                revision_expr = ast.unparse(revision_node)
        yield PyReference(line=repo_node.lineno, column=repo_node.col_offset, repo=repo_id, ref=ref, via=text,
                          revision_expr=revision_expr)


def as_repo_id(value: str, is_local_path: Callable[[str], bool]) -> RepoId | None:
    """``value`` as a Hub model id, or None: not ``owner/name``, or a folder that exists locally."""
    value = value.strip()
    if value.startswith((".", "/", "~")) or "\\" in value:
        return None
    try:
        repo_id = validate_repo_id(value)
    except ValueError:
        return None
    return None if is_local_path(value) else repo_id


def parse(source: str, filename: str) -> ast.Module:
    """Parse without running anything; SyntaxWarnings (bad escapes in old code) are not printed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=filename)


def char_column(line_text: str, byte_offset: int) -> int:
    """``ast`` counts columns in UTF-8 bytes; reports count characters."""
    return len(line_text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))

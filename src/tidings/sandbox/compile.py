"""Subscriber code, checked at subscribe time before it ever runs (in a worker process).

The check is an allow-list over the syntax tree: imports only of `ALLOWED_MODULES`, no name
with a double underscore wherever the grammar spells one (names, attributes, class-pattern
attributes, capture and rest names, import aliases, keywords, handler names: the usual road
to `__subclasses__`, `__globals__`, `__builtins__`), none of the builtins that reach outside
(`open`, `eval`, `exec`, `getattr` ...), `.format`/`.format_map` only on a string literal
with plain fields, and a top-level `def match(publication)`. This is the first wall; the
worker's Python-level guards are the second, the operating-system boundary around the
worker the last (docs/sandbox.md).

The syntax tree may be at most `MAX_DEPTH` levels deep. CPython's parser and compiler recurse
over the tree: deeper code fails to parse in the broker (RecursionError, MemoryError, "too
many nested parentheses") or to compile in a worker, whose recursion limit is lower. The bound
is checked by a walk that keeps its own stack, and a parser that gives up first is reported
with the same bound.
"""

from __future__ import annotations

import ast
import hashlib
import string
from collections.abc import Iterator

from tidings.errors import ErrorCode, TidingsError

FIELD = "function.code"
ALLOWED_MODULES = frozenset({
    "math", "re", "json", "statistics", "datetime", "string", "itertools", "functools",
    "collections", "tidings.functions",
})  # fmt: skip
LIBRARY = "tidings.functions"


def needs_library(source: str) -> bool:
    """Whether code may import the library, so needs a worker that loaded it. Sound by
    `check`: an import must name its module literally (no `__import__`, no strings run)."""
    return "tidings" in source


FORBIDDEN_NAMES = frozenset({
    "open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "hasattr", "input", "breakpoint", "help", "memoryview", "type",
    "object", "super", "classmethod", "staticmethod", "property", "exit", "quit", "dir",
    "id", "print", "format", "copyright", "credits", "license",
})  # fmt: skip

# frame and code objects lead to the worker's globals without a single dunder
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
    "ag_code", "ag_await", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "tb_frame", "tb_next", "co_code", "co_consts", "mro",
})  # fmt: skip


FORMATTERS = frozenset({"format", "format_map"})

# CPython's own bound on nested brackets (the parser's MAXLEVEL); a worker compiles code
# some 700 levels deep before its recursion limit (300 frames) stops it
MAX_DEPTH = 200
FORMAT_LEVELS = 2  # str.format's own: '{0:{1}}' reads, '{0:{1:{2}}}' raises
TOO_DEEP = f"nested too deeply: code may nest at most {MAX_DEPTH} levels"


def code_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _fail(code: ErrorCode, node: ast.AST | None, reason: str) -> TidingsError:
    line = getattr(node, "lineno", None)
    where = f"line {line}: " if line else ""
    return TidingsError(code, field=FIELD, detail=f"{where}{reason}")


def check(source: str) -> None:
    """Raise FUNCTION_INVALID (syntax, no `match`) or FUNCTION_FORBIDDEN, naming the line."""
    tree = _parse(source)
    for node in _walk_bounded(tree):
        _check_node(node)
    if not any(
        isinstance(n, ast.FunctionDef) and n.name == "match" and len(n.args.args) == 1
        for n in tree.body
    ):
        raise _fail(
            ErrorCode.FUNCTION_INVALID,
            None,
            "define a top-level function match(publication) returning a bool",
        )


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (RecursionError, MemoryError):
        # the parser's own stack ran out: how it says "nested too deeply"
        raise _fail(ErrorCode.FUNCTION_INVALID, None, TOO_DEEP) from None
    except SyntaxError as exc:
        if "too many nested" in exc.msg:
            raise _fail(ErrorCode.FUNCTION_INVALID, None, TOO_DEEP) from None
        raise TidingsError(
            ErrorCode.FUNCTION_INVALID,
            field=FIELD,
            detail=f"line {exc.lineno}: syntax error: {exc.msg}",
        ) from None


def _walk_bounded(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, depth first, with an explicit stack; refused past `MAX_DEPTH` levels."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _fail(ErrorCode.FUNCTION_INVALID, node, TOO_DEEP)
        yield node
        children = [(child, depth + 1) for child in ast.iter_child_nodes(node)]
        stack += reversed(children)  # popped in source order: the first refusal is reported


def _check_node(node: ast.AST) -> None:
    if isinstance(node, ast.Import | ast.ImportFrom):
        _check_import(node)
    elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f"{node.id!r} is not allowed")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
        # "{0.__class__}".format(x) and friends reach dunders through strings
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, "strings with '__' are not allowed")
    elif isinstance(node, ast.Global | ast.Nonlocal | ast.AsyncFunctionDef | ast.Await):
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f"{type(node).__name__} is not allowed")
    if isinstance(node, ast.Attribute) and node.attr in FORMATTERS:
        _check_format(node)
    _check_identifiers(node)


def _identifiers(node: ast.AST) -> list[str]:
    """Every name the node spells, wherever the grammar hides one: `Name.id`, `Attribute.attr`,
    `MatchClass.kwd_attrs` (`case object(__reduce_ex__=f)` binds an attribute), `MatchAs`/
    `MatchStar` names, `MatchMapping.rest`, `alias` names, `keyword.arg`, `ExceptHandler.name`,
    type parameters... Read from the node's fields, so a field the grammar gains later is
    checked too."""
    if isinstance(node, ast.Constant):
        return []  # a value, checked above; not a name
    names: list[str] = []
    for field, value in ast.iter_fields(node):
        if field == "type_comment":
            continue
        values = value if isinstance(value, list) else [value]
        names += [v for v in values if isinstance(v, str)]
    return names


def _check_identifiers(node: ast.AST) -> None:
    attributes = (
        [node.attr] if isinstance(node, ast.Attribute) else
        list(node.kwd_attrs) if isinstance(node, ast.MatchClass) else []
    )  # fmt: skip
    for name in _identifiers(node):
        if "__" in name:
            raise _fail(
                ErrorCode.FUNCTION_FORBIDDEN, node, f"names with '__' ({name!r}) are not allowed"
            )
    for name in attributes:
        if name in FORBIDDEN_ATTRIBUTES:
            raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f"attribute {name!r} is not allowed")
        if name in FORMATTERS and isinstance(node, ast.MatchClass):
            # `case str(format=f)` binds the bound method of a string built at run time
            raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f".{name} is not allowed in a pattern")


def _check_format(node: ast.Attribute) -> None:
    """`str.format`/`format_map` read any attribute chain their fields name
    (`"{0.__globals__}"` built at run time): allowed only on a string literal whose fields
    are plain positions or names, no `.attribute` and no `[index]`."""
    literal = node.value
    if not (isinstance(literal, ast.Constant) and isinstance(literal.value, str)):
        raise _fail(
            ErrorCode.FUNCTION_FORBIDDEN,
            node,
            f".{node.attr} is allowed only on a string literal ('{{}} {{name}}'.{node.attr}(...))",
        )
    problem = _format_problem(literal.value)
    if problem:
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f"{problem} in .{node.attr}")


def _format_problem(template: str) -> str | None:
    """Why the template's fields are not plain, if they are not. A spec holds fields of its
    own ('{0:{1}}'); str.format reads them two levels deep and raises deeper, so deeper is
    refused here, which also keeps this walk short."""
    templates = [(template, 1)]
    while templates:
        text, level = templates.pop()
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError:
            return "malformed format fields are not allowed"  # str.format would raise anyway
        for _, name, spec, _ in parsed:
            if name is None:
                continue
            if level > FORMAT_LEVELS:
                return f"format fields nested more than {FORMAT_LEVELS} deep are not allowed"
            if "." in name or "[" in name:
                return "format fields with '.' or '[' are not allowed"
            if spec:  # '{0:{1.x}}' hides a field in the spec
                templates.append((spec, level + 1))
    return None


def _check_import(node: ast.Import | ast.ImportFrom) -> None:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for name in names:
        if node.__dict__.get("level") or name not in ALLOWED_MODULES:
            allowed = ", ".join(sorted(ALLOWED_MODULES))
            raise _fail(
                ErrorCode.FUNCTION_FORBIDDEN,
                node,
                f"import of {name!r} is not allowed; allowed: {allowed}",
            )

"""Subscriber code, checked at subscribe time before it ever runs (in a worker process).

The check is an allow-list over the syntax tree: imports only of `ALLOWED_MODULES`, no name
or attribute with a double underscore (the usual road to `__subclasses__`, `__globals__`,
`__builtins__`), none of the builtins that reach outside (`open`, `eval`, `exec`, `getattr`
...), and a top-level `def match(publication)`. This is the first wall; the worker process
and its limits are the second (docs/sandbox.md).
"""

from __future__ import annotations

import ast
import hashlib

from tidings.errors import ErrorCode, TidingsError

FIELD = "function.code"
ALLOWED_MODULES = frozenset({
    "math", "re", "json", "statistics", "datetime", "string", "itertools", "functools",
    "collections", "tidings.functions",
})  # fmt: skip
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


def code_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _fail(code: ErrorCode, node: ast.AST | None, reason: str) -> TidingsError:
    line = getattr(node, "lineno", None)
    where = f"line {line}: " if line else ""
    return TidingsError(code, field=FIELD, detail=f"{where}{reason}")


def check(source: str) -> None:
    """Raise FUNCTION_INVALID (syntax, no `match`) or FUNCTION_FORBIDDEN, naming the line."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TidingsError(
            ErrorCode.FUNCTION_INVALID,
            field=FIELD,
            detail=f"line {exc.lineno}: syntax error: {exc.msg}",
        ) from None
    for node in ast.walk(tree):
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


def _check_node(node: ast.AST) -> None:
    if isinstance(node, ast.Import | ast.ImportFrom):
        _check_import(node)
    elif isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or "__" in node.id):
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f"{node.id!r} is not allowed")
    elif isinstance(node, ast.Attribute) and (
        "__" in node.attr or node.attr in FORBIDDEN_ATTRIBUTES
    ):
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f"attribute {node.attr!r} is not allowed")
    elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.arg | ast.keyword) and "__" in (
        getattr(node, "name", None) or getattr(node, "arg", None) or ""
    ):
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, "names with '__' are not allowed")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
        # "{0.__class__}".format(x) and friends reach dunders through strings
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, "strings with '__' are not allowed")
    elif isinstance(node, ast.Global | ast.Nonlocal | ast.AsyncFunctionDef | ast.Await):
        raise _fail(ErrorCode.FUNCTION_FORBIDDEN, node, f"{type(node).__name__} is not allowed")


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

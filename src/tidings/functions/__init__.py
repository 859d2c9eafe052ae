"""The custom function library: text and vision matching functions, local libraries only.

Each function takes the publication's data and its parameters and returns a bool; they are
usable as `builtin` subscriptions (`{"builtin": "detect_language", "params": {"language":
"en"}}`), from subscriber code (`from tidings.functions import detect_language`), and as URL
functions served by the broker (`POST /api/DetectLanguages`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from tidings.errors import ErrorCode, TidingsError

# name -> (module, required params, optional params)
BUILTINS: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    "detect_language": ("text", frozenset({"language"}), frozenset()),
    "key_phrases": ("text", frozenset({"any_of"}), frozenset()),
    "sentiment": ("text", frozenset(), frozenset({"label", "min_score"})),
    "detect_faces": ("vision", frozenset(), frozenset({"min_faces"})),
    "detect_printed_text": ("vision", frozenset(), frozenset({"contains"})),
    "analyze_image": ("vision", frozenset(), frozenset({"has"})),
}


def check_builtin(name: str, params: Mapping[str, Any], field: str = "function") -> None:
    """Refuse an unknown builtin or parameters it does not take, naming the field."""
    if name not in BUILTINS:
        raise TidingsError(
            ErrorCode.FUNCTION_UNKNOWN,
            field=f"{field}.builtin",
            name=name,
            known=", ".join(sorted(BUILTINS)),
        )
    _, required, optional = BUILTINS[name]
    missing, extra = required - set(params), set(params) - required - optional
    if missing or extra:
        detail = f"{name} takes {sorted(required | optional)}; " + (
            f"missing {sorted(missing)}" if missing else f"unknown {sorted(extra)}"
        )
        raise TidingsError(ErrorCode.FUNCTION_INVALID, field=f"{field}.params", detail=detail)


def function(name: str) -> Callable[[Any, Mapping[str, Any]], bool]:
    module = importlib.import_module(f"tidings.functions.{BUILTINS[name][0]}")
    return getattr(module, name)  # type: ignore[no-any-return]


def call_builtin(name: str, publication: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    return function(name)(publication.get("data"), params)


def preload() -> None:
    """Import every implementation and load its models now, e.g. before a worker's limits."""
    for name in BUILTINS:
        function(name)
    from tidings.functions import text, vision

    text.warm()
    vision.warm()


def __getattr__(name: str) -> Any:  # `from tidings.functions import detect_language`
    if name in BUILTINS:
        return function(name)
    raise AttributeError(name)

"""The custom function library: text and vision matching functions, local libraries only.

Each function takes the publication's data and its parameters and returns a bool; they are
usable as `builtin` subscriptions (`{"builtin": "detect_language", "params": {"language":
"en"}}`), from subscriber code (`from tidings.functions import detect_language`), and as URL
functions served by the broker (`POST /api/DetectLanguages`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from tidings.errors import ErrorCode, TidingsError
from tidings.extras import hint
from tidings.model import convert

# the library under the thesis's names, as the broker serves it (`POST /api/<name>`): the one
# path on the broker's own endpoint a URL function may call
SERVED = {
    "DetectLanguages": "detect_language",
    "DetectKeyPhrases": "key_phrases",
    "DetectSentiments": "sentiment",
    "DetectFaces": "detect_faces",
    "DetectPrintedText": "detect_printed_text",
    "AnalyzeImage": "analyze_image",
}
SERVED_PATHS = frozenset(f"/api/{name}" for name in SERVED)


class Params(Struct, forbid_unknown_fields=True):
    """A builtin's parameters, checked at subscribe time (not when it first runs)."""


class LanguageParams(Params):
    language: Annotated[str, Meta(min_length=2, max_length=16, description="ISO 639-1")]


class KeyPhrasesParams(Params):
    any_of: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(min_length=1)]


class SentimentParams(Params):
    label: Literal["positive", "negative", "neutral"] | UnsetType = UNSET
    min_score: Annotated[float, Meta(ge=-1, le=1)] | UnsetType = UNSET


class FacesParams(Params):
    min_faces: Annotated[int, Meta(ge=0)] | UnsetType = UNSET


class PrintedTextParams(Params):
    contains: str | UnsetType = UNSET


class AnalyzeImageParams(Params):
    has: list[str] | UnsetType = UNSET


# name -> (module, the type of its params)
BUILTINS: dict[str, tuple[str, type[Params]]] = {
    "detect_language": ("text", LanguageParams),
    "key_phrases": ("text", KeyPhrasesParams),
    "sentiment": ("text", SentimentParams),
    "detect_faces": ("vision", FacesParams),
    "detect_printed_text": ("vision", PrintedTextParams),
    "analyze_image": ("vision", AnalyzeImageParams),
}


def check_builtin(name: str, params: Mapping[str, Any], field: str = "function") -> None:
    """Refuse an unknown builtin or parameters it does not take or of the wrong type,
    naming the field (`function.params.language`)."""
    if name not in BUILTINS:
        raise TidingsError(
            ErrorCode.FUNCTION_UNKNOWN,
            field=f"{field}.builtin",
            name=name,
            known=", ".join(sorted(BUILTINS)),
        )
    extra = missing_extra(BUILTINS[name][0])
    if extra is not None:
        raise TidingsError(
            ErrorCode.FUNCTION_UNAVAILABLE,
            field=f"{field}.builtin",
            detail=hint(extra, f"the builtin {name!r}"),
        )
    prefix = "params" if field == "$" else f"{field}.params"
    try:
        convert(dict(params), BUILTINS[name][1])
    except TidingsError as exc:
        field_name = prefix if exc.field in (None, "$") else f"{prefix}.{exc.field}"
        detail = f"{name}: {exc.message}"
        raise TidingsError(ErrorCode.FUNCTION_INVALID, field=field_name, detail=detail) from None


# module -> (the extra that installs its libraries, their import names)
NEEDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "text": ("text", ("langdetect", "vaderSentiment", "yake")),
    "vision": ("vision", ("skimage", "PIL", "pytesseract")),
}


def missing_extra(module: str) -> str | None:
    """The extra to install before `module`'s functions can run, or None if they can."""
    extra, names = NEEDS[module]
    return extra if any(importlib.util.find_spec(n) is None for n in names) else None


def function(name: str) -> Callable[[Any, Mapping[str, Any]], bool]:
    module = importlib.import_module(f"tidings.functions.{BUILTINS[name][0]}")
    return getattr(module, name)  # type: ignore[no-any-return]


def call_builtin(name: str, publication: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    return function(name)(publication.get("data"), params)


def preload() -> None:
    """Import every installed implementation and load its models now, e.g. before a
    worker's limits (a light install may lack the text or vision extra)."""
    for module in NEEDS:
        if missing_extra(module) is None:
            importlib.import_module(f"tidings.functions.{module}").warm()


def __getattr__(name: str) -> Any:  # `from tidings.functions import detect_language`
    if name in BUILTINS:
        return function(name)
    raise AttributeError(name)

"""Text functions. They read the data when it is a string, else its `text` field."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from langdetect import DetectorFactory, LangDetectException, detect
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
from yake import KeywordExtractor

from tidings.functions.caps import check_text

DetectorFactory.seed = 0  # langdetect is random by default; matching must be repeatable


def text_of(data: Any) -> str:
    """The text to read; InputTooLarge past the cap."""
    if isinstance(data, str):
        return check_text(data)
    if isinstance(data, Mapping) and isinstance(data.get("text"), str):
        return check_text(str(data["text"]))
    return ""


def language(text: str) -> str | None:
    try:
        return str(detect(text)) if text.strip() else None
    except LangDetectException:
        return None


def detect_language(data: Any, params: Mapping[str, Any]) -> bool:
    """True when the text is in `params["language"]` (ISO 639-1, e.g. "en")."""
    return bool(language(text_of(data)) == params["language"])


@lru_cache(maxsize=1)
def _extractor() -> KeywordExtractor:
    return KeywordExtractor(lan="en", n=3, top=15)


def phrases(text: str) -> list[str]:
    return [p.lower() for p, _ in _extractor().extract_keywords(text)] if text.strip() else []


def key_phrases(data: Any, params: Mapping[str, Any]) -> bool:
    """True when any of `params["any_of"]` is among (or inside) the text's key phrases."""
    wanted = [w.lower() for w in params["any_of"]]
    found = phrases(text_of(data))
    return any(w in p for w in wanted for p in found)


@lru_cache(maxsize=1)
def _analyzer() -> SentimentIntensityAnalyzer:
    return SentimentIntensityAnalyzer()


def score(text: str) -> float:
    """VADER's compound score, from -1 (negative) to 1 (positive)."""
    return float(_analyzer().polarity_scores(text)["compound"])


def label(value: float) -> str:
    return "positive" if value >= 0.05 else "negative" if value <= -0.05 else "neutral"


def sentiment(data: Any, params: Mapping[str, Any]) -> bool:
    """`label`: positive, negative or neutral; or `min_score`: the compound score at least."""
    value = score(text_of(data))
    if "min_score" in params:
        return value >= float(params["min_score"])
    return bool(label(value) == params.get("label", "positive"))


def warm() -> None:
    """Load the language profiles, the lexicon and the extractor once."""
    language("warm up the language profiles")
    _analyzer()
    _extractor()

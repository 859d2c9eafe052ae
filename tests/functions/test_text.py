"""Text functions: language, key phrases, sentiment; local libraries only."""

from __future__ import annotations

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.functions import call_builtin, check_builtin


def pub(data: object) -> dict[str, object]:
    return {"data": data}


def test_english_and_spanish_are_told_apart() -> None:
    english = pub("This is an English sentence about the weather today.")
    spanish = pub("Este es un texto en español sobre el tiempo de hoy.")
    params = {"language": "en"}
    assert call_builtin("detect_language", english, params)
    assert not call_builtin("detect_language", spanish, params)


def test_text_functions_read_the_text_field_of_an_object() -> None:
    data = {"text": "This is an English sentence about the weather today."}
    assert call_builtin("detect_language", pub(data), {"language": "en"})


def test_key_phrases_find_a_named_place() -> None:
    text = pub("DEBS2018 will be held at the University of Waikato in New Zealand.")
    assert call_builtin("key_phrases", text, {"any_of": ["waikato"]})
    assert not call_builtin("key_phrases", text, {"any_of": ["munich"]})


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("I love this, it is wonderful!", "positive"),
        ("This is terrible and awful.", "negative"),
        ("The box is on the table.", "neutral"),
    ],
)
def test_sentiment_labels_follow_the_score(text: str, label: str) -> None:
    assert call_builtin("sentiment", pub(text), {"label": label})


def test_unknown_builtins_and_parameters_are_refused_with_their_field() -> None:
    with pytest.raises(TidingsError) as caught:
        check_builtin("read_minds", {})
    assert (caught.value.code, caught.value.field) == (
        ErrorCode.FUNCTION_UNKNOWN,
        "function.builtin",
    )
    with pytest.raises(TidingsError) as caught:
        check_builtin("detect_language", {})
    assert caught.value.field == "function.params.language"
    with pytest.raises(TidingsError) as caught:
        check_builtin("detect_language", {"language": {"x": 1}})
    assert (caught.value.code, caught.value.field) == (
        ErrorCode.FUNCTION_INVALID,
        "function.params.language",
    )

"""The function library served as URL functions (/api/Detect*, /api/AnalyzeImage) by a real
server: the URL-function protocol in, `{"match": bool}` out, and clear 4xx for bad bodies."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.functions.images import PRINTED_PAGE, WITH_FACE, WITHOUT_FACES, encoded

ENGLISH = "The weather in Munich is sunny and warm today, and everyone is happy."
SPANISH = "El tiempo en Madrid es soleado y cálido hoy."


def ask(http: httpx.Client, route: str, data: Any, **params: Any) -> bool:
    body = {"publication": {"id": "p", "data": data}, "params": params}
    response = http.post(f"/api/{route}", json=body)
    assert response.status_code == 200, response.text
    return response.json()["match"]  # type: ignore[no-any-return]


def test_languages_are_told_apart(http: httpx.Client) -> None:
    assert ask(http, "DetectLanguages", ENGLISH, language="en")
    assert not ask(http, "DetectLanguages", SPANISH, language="en")
    assert ask(http, "DetectLanguages", {"text": SPANISH}, language="es")


def test_key_phrases_and_sentiment_answer_on_text(http: httpx.Client) -> None:
    assert ask(http, "DetectKeyPhrases", ENGLISH, any_of=["Munich"])
    assert not ask(http, "DetectKeyPhrases", ENGLISH, any_of=["Waikato"])
    assert ask(http, "DetectSentiments", ENGLISH, label="positive")
    assert not ask(http, "DetectSentiments", ENGLISH, label="negative")


@pytest.mark.slow
def test_images_are_looked_at(http: httpx.Client) -> None:
    face, cup = {"image": encoded(WITH_FACE)}, {"image": encoded(WITHOUT_FACES[0])}
    assert ask(http, "DetectFaces", face)
    assert not ask(http, "DetectFaces", cup, min_faces=1)
    assert ask(http, "AnalyzeImage", face, has=["faces"])
    assert ask(http, "DetectPrintedText", {"image": encoded(PRINTED_PAGE, "PNG")})
    assert not ask(http, "DetectPrintedText", cup)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"params": {"language": "en"}}, "publication"),
        ({"publication": "text", "params": {"language": "en"}}, "publication"),
        ({"publication": {"data": "x"}, "params": []}, "params"),
        ({"publication": {"data": "x"}, "params": {}}, "params.language"),
        ({"publication": {"data": "x"}, "params": {"language": "en", "x": 1}}, "params.x"),
        ({"publication": {"data": "x"}, "params": {"language": {"x": 1}}}, "params.language"),
    ],
)
def test_bad_bodies_get_a_4xx_naming_the_field(
    http: httpx.Client, body: dict[str, Any], field: str
) -> None:
    response = http.post("/api/DetectLanguages", json=body)
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert error["field"] == field and error["code"]


def test_a_body_that_is_not_json_is_refused(http: httpx.Client) -> None:
    response = http.post("/api/DetectFaces", content=b"{not json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"

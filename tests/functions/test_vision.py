"""Vision functions on real photographs that scikit-image ships."""

from __future__ import annotations

import pytest
from tests.functions.images import PRINTED_PAGE, WITH_FACE, WITHOUT_FACES, encoded

from tidings.functions import call_builtin


def image(name: str) -> dict[str, object]:
    return {"data": {"image": encoded(name, "PNG")}}


def test_a_photo_of_a_person_has_a_face() -> None:
    assert call_builtin("detect_faces", image(WITH_FACE), {})


@pytest.mark.parametrize("name", WITHOUT_FACES)
def test_photos_of_things_have_no_face(name: str) -> None:
    assert not call_builtin("detect_faces", image(name), {})


def test_printed_text_is_read() -> None:
    assert call_builtin("detect_printed_text", image(PRINTED_PAGE), {})
    assert not call_builtin("detect_printed_text", image(WITHOUT_FACES[0]), {})


def test_an_image_is_analysed_for_the_features_asked() -> None:
    assert call_builtin("analyze_image", image(WITH_FACE), {"has": ["faces"]})
    assert not call_builtin("analyze_image", image(WITHOUT_FACES[0]), {"has": ["faces"]})


def test_data_without_a_readable_image_matches_nothing() -> None:
    for data in ("text", {"image": "not base64!"}, {"image": "aGVsbG8="}):
        assert not call_builtin("detect_faces", {"data": data}, {})


def test_jpeg_photos_work_as_well_as_png() -> None:
    assert call_builtin("detect_faces", {"data": {"image": encoded(WITH_FACE)}}, {})

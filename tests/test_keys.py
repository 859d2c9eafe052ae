"""Publisher keys: parsed with their prefixes, hashed, malformed entries named (never the
whole key)."""

from __future__ import annotations

import pytest

from tidings.config import load_settings
from tidings.errors import ErrorCode, TidingsError
from tidings.ids import hash_token
from tidings.keys import publisher_keys


def test_keys_are_parsed_with_their_prefixes_and_kept_hashed() -> None:
    sensors, ops = publisher_keys("sensors=sensors/|alerts/, ops=*")
    assert sensors.hashed == hash_token("sensors") and sensors.prefixes == ("sensors/", "alerts/")
    assert sensors.allows(["sensors/a", "alerts/b"]) and not sensors.allows(["billing"])
    assert not sensors.allows([]) and ops.allows([]) and ops.allows(["anything"])


@pytest.mark.parametrize("text", ["secretvalue", "=sensors/", "secretvalue=", "secretvalue=|"])
def test_a_malformed_entry_is_refused_without_showing_the_key(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        publisher_keys(text)
    assert "secretvalue" not in str(caught.value)


def test_the_settings_refuse_malformed_keys() -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings(env={"TIDINGS_ACCESS__PUBLISH_KEYS": "nokey"})
    assert (caught.value.code, caught.value.field) == (
        ErrorCode.CONFIG_INVALID,
        "access__publish_keys",
    )

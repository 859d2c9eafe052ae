"""Progress tokens: brokers given one secrets key (or one key file) give and take the same
tokens; a broker with another key reads none of them."""

from __future__ import annotations

import base64
from pathlib import Path

from tidings.broker.progress import PURPOSE, ProgressTokens
from tidings.config import load_settings
from tidings.delivery.sealing import new_key, sealer


def tokens(data_dir: Path, key: str = "") -> ProgressTokens:
    overrides = {"data_dir": data_dir} | ({"webhooks__secrets_key": key} if key else {})
    return ProgressTokens(sealer(load_settings(overrides, env={})).derived(PURPOSE))


def test_brokers_given_one_secrets_key_read_each_others_tokens(tmp_path: Path) -> None:
    key = new_key().decode()
    one, other = tokens(tmp_path / "a", key), tokens(tmp_path / "b", key)
    assert other.valid("p1", one.token("p1"))
    assert not other.valid("p2", one.token("p1"))  # a token is one publication's


def test_brokers_on_one_key_file_agree_and_another_key_reads_nothing(tmp_path: Path) -> None:
    first, again = tokens(tmp_path / "shared"), tokens(tmp_path / "shared")
    elsewhere = tokens(tmp_path / "elsewhere")
    assert again.valid("p1", first.token("p1"))
    assert not elsewhere.valid("p1", first.token("p1"))
    assert not first.valid("p1", "") and not first.valid("p1", None)


def test_the_derived_key_is_neither_the_secrets_key_nor_another_purposes() -> None:
    key = new_key()
    keys = sealer(load_settings({"webhooks__secrets_key": key.decode()}, env={}))
    derived = keys.derived(PURPOSE)
    assert derived not in (base64.urlsafe_b64decode(key), keys.derived(b"another purpose"))

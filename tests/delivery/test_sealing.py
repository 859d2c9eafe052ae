"""Webhook secrets are sealed at rest with the broker's key file, opened only with it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from tidings.config import Settings, WebhookSettings
from tidings.delivery.sealing import PREFIX, Sealer, sealer
from tidings.errors import ErrorCode, TidingsError

SECRET = "whsec_0123456789abcdefghijklmnopqrstuvwxyzABCDEF"


def test_a_sealed_secret_opens_to_itself_and_shows_nothing_of_it() -> None:
    sealer = Sealer(Fernet.generate_key())
    sealed = sealer.seal(SECRET)
    assert sealed.startswith(PREFIX) and SECRET not in sealed and SECRET[6:20] not in sealed
    assert sealer.open(sealed) == SECRET
    assert sealer.seal(SECRET) != sealed  # a fresh IV each time: equal secrets look unequal


def test_a_secret_stored_before_sealing_is_read_as_it_is() -> None:
    assert Sealer(Fernet.generate_key()).open(SECRET) == SECRET


def test_a_secret_sealed_with_another_key_is_unavailable_not_garbage() -> None:
    sealed = Sealer(Fernet.generate_key()).seal(SECRET)
    with pytest.raises(TidingsError) as caught:
        Sealer(Fernet.generate_key()).open(sealed)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert "secrets_key_file" in caught.value.message


def test_the_key_file_is_made_private_once_and_read_again(tmp_path: Path) -> None:
    path = tmp_path / "data" / "secrets.key"
    sealed = Sealer.from_file(path).seal(SECRET)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Sealer.from_file(path).open(sealed) == SECRET  # the same key at the next start
    assert [p.name for p in path.parent.iterdir()] == ["secrets.key"]  # nothing left aside


def test_a_key_file_that_holds_no_key_is_refused_by_its_setting(tmp_path: Path) -> None:
    path = tmp_path / "secrets.key"
    path.write_text("not a key\n")
    with pytest.raises(TidingsError) as caught:
        Sealer.from_file(path)
    assert caught.value.code is ErrorCode.CONFIG_INVALID
    assert caught.value.field == "webhooks__secrets_key_file"


def test_a_sealed_form_once_opened_is_not_decrypted_again() -> None:
    """The webhooks read every endpoint every few seconds: each sealed form is opened once."""
    key = Fernet.generate_key()
    sealer = Sealer(key)
    sealed, other = sealer.seal(SECRET), Sealer(key).seal("whsec_other")
    assert sealer.open(sealed) == SECRET
    sealer._fernet = Fernet(Fernet.generate_key())  # decrypting would now fail
    assert sealer.open(sealed) == SECRET
    with pytest.raises(TidingsError):
        sealer.open(other)


def test_a_key_given_in_the_settings_is_used_before_any_file(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    settings = Settings(data_dir=tmp_path, webhooks=WebhookSettings(secrets_key=key))
    sealed = sealer(settings).seal("s3cret")
    assert Sealer(key.encode()).open(sealed) == "s3cret"
    assert not (tmp_path / "secrets.key").exists()


def test_a_key_setting_that_holds_no_key_is_refused_by_its_name() -> None:
    settings = Settings(webhooks=WebhookSettings(secrets_key="not a key"))
    with pytest.raises(TidingsError) as caught:
        sealer(settings)
    assert caught.value.code is ErrorCode.CONFIG_INVALID
    assert caught.value.field == "webhooks__secrets_key"

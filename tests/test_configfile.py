"""tidings.toml: every setting the environment can set, refused when unknown or mistyped,
below the flags and the environment and above the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidings.config import explain, load_settings
from tidings.errors import ErrorCode, TidingsError


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tidings.toml"
    path.write_text(text)
    return path


def test_the_file_sets_top_level_and_grouped_settings(tmp_path: Path) -> None:
    path = written(
        tmp_path,
        'port = 8181\ndata_dir = "/srv/tidings"\n[queues]\nmax_attempts = 3\n'
        "visibility_timeout_s = 10\n[elastic]\nautoscale = true\n",
    )
    settings = load_settings(env={}, config=path)
    assert (settings.port, settings.data_dir) == (8181, Path("/srv/tidings"))
    assert settings.queues.max_attempts == 3 and settings.queues.visibility_timeout_s == 10.0
    assert settings.elastic.autoscale is True


def test_flags_then_the_environment_win_over_the_file(tmp_path: Path) -> None:
    path = written(tmp_path, "port = 8181\n[queues]\nmax_attempts = 3\n")
    env = {"TIDINGS_PORT": "8282", "TIDINGS_QUEUES__MAX_ATTEMPTS": "4"}
    settings, sources = explain({"port": 8383}, env=env, config=path)
    assert (settings.port, settings.queues.max_attempts) == (8383, 4)
    assert (sources["port"], sources["queues__max_attempts"]) == ("flag", "environment")
    assert sources["host"] == "default"


def test_the_file_is_found_through_tidings_config(tmp_path: Path) -> None:
    path = written(tmp_path, "port = 8181\n")
    settings, sources = explain(env={"TIDINGS_CONFIG": str(path)})
    assert (settings.port, sources["port"]) == (8181, "file")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[queues]\nmax_atempts = 3\n", "queues.max_atempts"),
        ("portt = 1\n", "portt"),
        ("[nowhere]\nx = 1\n", "nowhere"),
        ("queues = 3\n", "queues"),
        ('port = "8080"\n', "port"),
        ("event_log = 1\n", "event_log"),
        ("[queues]\nmax_attempts = 2.5\n", "queues.max_attempts"),
        ("port = \n", "config"),
    ],
)
def test_a_wrong_file_is_refused_naming_the_key(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings(env={}, config=written(tmp_path, text))
    assert (caught.value.code, caught.value.field) == (ErrorCode.CONFIG_INVALID, field)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings(env={}, config=tmp_path / "nothere.toml")
    assert caught.value.field == "config"


def test_the_file_s_values_are_checked_as_every_other_source_s(tmp_path: Path) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings(env={}, config=written(tmp_path, "port = 70000\n"))
    assert caught.value.field == "port"

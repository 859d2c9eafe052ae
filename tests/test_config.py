"""Settings come from flags, then the environment, then defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidings.config import load_settings
from tidings.errors import ErrorCode, TidingsError


def test_defaults_bind_loopback_and_use_sqlite_under_the_data_dir() -> None:
    settings = load_settings(env={})
    assert settings.host == "127.0.0.1"
    assert settings.resolved_store_url == "sqlite:///.tidings/tidings.db"


def test_the_environment_overrides_defaults_and_flags_override_the_environment() -> None:
    env = {"TIDINGS_PORT": "9000", "TIDINGS_HOST": "0.0.0.0"}
    settings = load_settings({"port": 9100}, env=env)
    assert (settings.port, settings.host) == (9100, "0.0.0.0")


def test_nested_settings_are_addressed_with_double_underscores() -> None:
    env = {"TIDINGS_QUEUES__MAX_ATTEMPTS": "9", "TIDINGS_EVENT_LOG": "false"}
    settings = load_settings(env=env)
    assert settings.queues.max_attempts == 9 and settings.event_log is False


def test_paths_are_paths() -> None:
    assert load_settings({"data_dir": Path("/tmp/x")}, env={}).log_dir == Path("/tmp/x/log")


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"TIDINGS_PORT": "eighty"}, "port"),
        ({"TIDINGS_EVENT_LOG": "maybe"}, "event_log"),
        ({"TIDINGS_WEBHOOKS__DENY_NETWORKS": "10.0.0.0/8,nowhere"}, "webhooks__deny_networks"),
        ({"TIDINGS_FUNCTIONS__URL_DENY_NETWORKS": "::1/129"}, "functions__url_deny_networks"),
    ],
)
def test_a_malformed_environment_value_names_its_setting(env: dict[str, str], field: str) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings(env=env)
    assert (caught.value.code, caught.value.field) == (ErrorCode.CONFIG_INVALID, field)


def test_an_unknown_matching_mode_is_refused() -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings({"matching": "magic"}, env={})
    assert caught.value.field == "matching"


def test_a_path_given_as_text_becomes_a_path() -> None:
    assert load_settings({"data_dir": "/tmp/y"}, env={}).data_dir == Path("/tmp/y")


@pytest.mark.parametrize("port", [0, 65536, 99999])
def test_a_port_out_of_range_is_refused(port: int) -> None:
    with pytest.raises(TidingsError) as refused:
        load_settings({"port": port}, env={})
    assert refused.value.field == "port"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [({"logs__level": "loud"}, "logs__level"), ({"logs__format": "xml"}, "logs__format")],
)
def test_an_unknown_log_level_or_format_is_refused(overrides: dict[str, str], field: str) -> None:
    with pytest.raises(TidingsError) as refused:
        load_settings(overrides, env={})
    assert refused.value.field == field


def test_the_webhook_settings_come_from_the_environment() -> None:
    env = {"TIDINGS_WEBHOOKS__FAILURES_TO_PAUSE": "3", "TIDINGS_WEBHOOKS__TIMEOUT_S": "2.5"}
    hooks = load_settings(env=env).webhooks
    assert (hooks.failures_to_pause, hooks.timeout_s, hooks.concurrency) == (3, 2.5, 4)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("batch_size", 0),
        ("timeout_s", 0),
        ("concurrency", 0),
        ("backoff_base_s", -1),
        ("backoff_cap_s", 0.5),  # below the base (1 s)
        ("failures_to_pause", 0),
    ],
)
def test_a_webhook_setting_out_of_range_is_refused(name: str, value: float) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings({f"webhooks__{name}": value}, env={})
    assert caught.value.code == ErrorCode.CONFIG_INVALID
    assert caught.value.field == f"webhooks__{name}"


def test_the_elastic_unreachable_time_comes_from_the_environment() -> None:
    settings = load_settings({}, env={"TIDINGS_ELASTIC__UNREACHABLE_S": "2.5"})
    assert settings.elastic.unreachable_s == 2.5
    assert load_settings({}, env={}).elastic.unreachable_s == 1.0


@pytest.mark.parametrize("value", [-1, 3601])
def test_an_elastic_unreachable_time_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings({"elastic__unreachable_s": value}, env={})
    assert caught.value.code == ErrorCode.CONFIG_INVALID
    assert caught.value.field == "elastic__unreachable_s"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("detect_rate_per_s", 0),
        ("detect_burst", 0),
        ("max_workers", 0),
        ("max_text_bytes", 0),
        ("url_timeout_s", 0),
        ("url_concurrency", 0),
        ("url_concurrency_per_subscriber", 0),
        ("url_queue_per_subscriber", 0),
        ("builtin_cpu_s", 0),
        ("builtin_wall_s", 15),  # below twice the CPU budget (10 s)
    ],
)
def test_a_function_setting_out_of_range_is_refused(name: str, value: float) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings({f"functions__{name}": value}, env={})
    assert caught.value.code is ErrorCode.CONFIG_INVALID
    assert caught.value.field == f"functions__{name}"


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_connections_per_address", -1), ("body_min_rate", -1), ("body_rate_grace_s", -0.5)],
)
def test_a_connection_bound_out_of_range_is_refused(name: str, value: float) -> None:
    with pytest.raises(TidingsError) as caught:
        load_settings({f"http__{name}": value}, env={})
    assert caught.value.code is ErrorCode.CONFIG_INVALID
    assert caught.value.field == f"http__{name}"

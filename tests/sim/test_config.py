"""Simulator configurations: both formats parse, and every refusal names its path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.sim.config import parse_config

EXAMPLES = Path(__file__).parents[2] / "examples" / "sim"


def thesis(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "baseUrl": "http://localhost:7071/api",
        "providerType": "Azure",
        "applicationMode": "Subscriber",
        "nodesCount": 10,
        "topicsMetadata": {"nodesCount": 5, "topics": ["topic1", "topic2"]},
        "functionsMetadata": {
            "nodesCount": 2,
            "functions": [
                {
                    "functionType": "url",
                    "subscriptionTopic": "function1",
                    "matchingFunction": "http://localhost:7071/api/DetectFaces",
                    "matchingInputs": "index",
                }
            ],
        },
    }
    return raw | changes


def refusal(raw: Any) -> TidingsError:
    with pytest.raises(TidingsError) as caught:
        parse_config(raw)
    assert caught.value.code == ErrorCode.CONFIG_INVALID
    return caught.value


def test_the_thesis_fig_5_8_config_makes_10_subscribers_5_on_topics_2_on_the_function() -> None:
    config = parse_config(thesis())
    groups = config.subscribers
    assert [g.count for g in groups] == [5, 2, 3]
    assert groups[0].topics == ["topic1", "topic2"]
    assert groups[1].functions == [
        {"function_type": "function1", "url": "http://localhost:7071/api/DetectFaces", "params": {}}
    ]
    assert config.url == "http://localhost:7071"
    assert config.publishers == []  # Subscriber mode only subscribes


def test_simulator_mode_adds_one_publisher_per_topic_and_function_type() -> None:
    config = parse_config(thesis(applicationMode="Simulator"))
    assert [(p.topics, p.function_types) for p in config.publishers] == [
        (["topic1"], []),
        (["topic2"], []),
        ([], ["function1"]),
    ]


def test_a_url_function_without_a_url_is_refused_naming_matching_function() -> None:
    raw = thesis()
    raw["functionsMetadata"]["functions"][0]["matchingFunction"] = "DetectFaces"
    assert refusal(raw).field == "functionsMetadata.functions[0].matchingFunction"


def test_a_matching_function_of_the_wrong_type_is_refused_naming_its_path() -> None:
    raw = thesis()
    raw["functionsMetadata"]["functions"][0]["matchingFunction"] = 42
    assert refusal(raw).field == "functionsMetadata.functions[0].matchingFunction"


def test_an_unknown_function_type_is_refused_naming_its_path() -> None:
    raw = thesis()
    raw["functionsMetadata"]["functions"][0]["functionType"] = "lambda"
    assert refusal(raw).field == "functionsMetadata.functions[0].functionType"


def test_an_unknown_field_is_refused_by_its_full_path() -> None:
    raw = {"publishers": [{"rate": 1, "sped": 2}]}
    assert refusal(raw).field == "publishers[0].sped"


def test_a_bad_topic_filter_is_refused_with_the_brokers_own_path() -> None:
    raw = {"subscribers": [{"count": 2, "topics": ["ok", "home/+/x"]}]}
    assert refusal(raw).field == "subscribers[0].topics[1]"


def test_a_bad_predicate_operator_is_refused_naming_it() -> None:
    raw = {"subscribers": [{"predicates": [{"key": "t", "op": "~", "value": 1}]}]}
    assert refusal(raw).field == "subscribers[0].predicates[0].op"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"publishers": [{"rate": 0}]}, "publishers[0].rate"),
        ({"publishers": [{"payload_bytes": 10**6}]}, "publishers[0].payload_bytes"),
        (
            {"publishers": [{"attributes": {"t": {"between": [1, 2]}}}]},
            "publishers[0].attributes.t",
        ),
        (
            {"subscribers": [{"offline": [{"at": 1, "seconds": -1}]}]},
            "subscribers[0].offline[0].seconds",
        ),
        ({"url": "localhost:8080"}, "url"),
        ({"duration": "long"}, "duration"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_path(raw: dict[str, Any], field: str) -> None:
    assert refusal(raw).field == field


def test_the_example_configs_validate() -> None:
    from tidings.sim.config import load_config

    assert load_config(EXAMPLES / "native.json").subscriber_count == 35
    assert load_config(EXAMPLES / "thesis.json").subscriber_count == 10


def test_a_url_function_given_as_a_path_is_the_brokers_own() -> None:
    from tidings.sim.config import on_broker

    relative = {"function_type": "text", "url": "/api/DetectLanguages"}
    absolute = {"function_type": "text", "url": "http://elsewhere/f"}
    assert on_broker(relative, "http://127.0.0.1:9000/")["url"] == (
        "http://127.0.0.1:9000/api/DetectLanguages"
    )
    assert on_broker(absolute, "http://127.0.0.1:9000") == absolute


def test_the_thesis_example_calls_its_function_on_whatever_broker_it_runs_against() -> None:
    from tidings.sim.config import load_config

    groups = load_config(EXAMPLES / "thesis.json").subscribers
    [functions] = [g.functions for g in groups if g.functions]
    assert functions[0]["url"] == "/api/DetectLanguages"


def test_the_live_latencies_are_the_deliveries_own() -> None:
    from tidings.sim.control import Control

    control = Control()
    control.delivered(1, 1.0, 0.5)
    control.delivered(1, 2.0, 0.25)
    assert control.recent_latencies() == [0.5, 0.25]

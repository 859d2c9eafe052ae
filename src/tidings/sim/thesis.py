"""The thesis's evaluation-app configuration (fig. 5.8) as a native simulator configuration.

`nodesCount` subscribers: the first `topicsMetadata.nodesCount` subscribe to the topics, the
next `functionsMetadata.nodesCount` to every function, the rest to nothing. Publishers (modes
`Publisher` and `Simulator`) are one per topic and one per function's `subscriptionTopic`,
each publishing `rate` per second. `functionType` url | code | builtin maps onto a function
subscription of that kind; `matchingInputs` given as an object (or `parameters`) becomes its
params, while a string (the thesis's input name) is kept in the config only, since Tidings
hands a function the whole publication.
"""

from __future__ import annotations

from typing import Any

from tidings.sim.config import PublisherGroup, SimConfig, SubscriberGroup, ThesisConfig

SAMPLE_TEXT = "The weather in Munich is sunny and warm today."


def broker_url(base_url: str | None) -> str | None:
    """The thesis's `.../api` base is the broker's root (the native API is at /v1)."""
    if base_url is None:
        return None
    url = base_url.rstrip("/")
    return url[: -len("/api")] if url.endswith("/api") else url


def function_body(fn: Any) -> dict[str, Any]:
    params = fn.parameters
    if params is None and isinstance(fn.matching_inputs, dict):
        params = fn.matching_inputs
    return {
        "function_type": fn.subscription_topic,
        fn.function_type: fn.matching_function,
        "params": params or {},
    }


def _subscribers(thesis: ThesisConfig) -> list[SubscriberGroup]:
    topics, functions = thesis.topics_metadata, thesis.functions_metadata
    groups = []
    if topics.nodes_count and topics.topics:
        groups.append(SubscriberGroup(count=topics.nodes_count, topics=list(topics.topics)))
    if functions.nodes_count and functions.functions:
        bodies = [function_body(fn) for fn in functions.functions]
        groups.append(SubscriberGroup(count=functions.nodes_count, functions=bodies))
    rest = thesis.nodes_count - sum(g.count for g in groups)
    if rest > 0:
        groups.append(SubscriberGroup(count=rest))
    return groups


def _publishers(thesis: ThesisConfig) -> list[PublisherGroup]:
    rate = thesis.rate
    by_topic = [PublisherGroup(rate=rate, topics=[t]) for t in thesis.topics_metadata.topics]
    kinds = dict.fromkeys(f.subscription_topic for f in thesis.functions_metadata.functions)
    by_function = [PublisherGroup(rate=rate, function_types=[k], text=SAMPLE_TEXT) for k in kinds]
    return by_topic + by_function


def native(thesis: ThesisConfig) -> SimConfig:
    mode = thesis.application_mode
    return SimConfig(
        name=f"thesis-{mode.lower()}",
        url=broker_url(thesis.base_url),
        duration=thesis.duration,
        seed=thesis.seed,
        subscribers=_subscribers(thesis) if mode != "Publisher" else [],
        publishers=_publishers(thesis) if mode != "Subscriber" else [],
    )

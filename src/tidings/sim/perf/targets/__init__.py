"""One adapter per broker behind `Target`; `open_target(name, url, workload)` picks one."""

from __future__ import annotations

import importlib

from tidings.errors import invalid
from tidings.sim.perf.targets.base import Target
from tidings.sim.perf.traffic import Workload

# name -> (module, class, default URL). Tidings without a URL gets an embedded broker.
TARGETS: dict[str, tuple[str, str, str | None]] = {
    "tidings": ("tidings.sim.perf.targets.tidings", "TidingsTarget", None),
    "tidings-http": ("tidings.sim.perf.targets.tidings", "TidingsPullTarget", None),
    "rabbitmq": (
        "tidings.sim.perf.targets.rabbitmq",
        "RabbitTarget",
        "amqp://guest:guest@127.0.0.1:5672/",
    ),
    "nats": ("tidings.sim.perf.targets.nats", "NatsTarget", "nats://127.0.0.1:4222"),
    "nats-jetstream": ("tidings.sim.perf.targets.nats", "JetStreamTarget", "nats://127.0.0.1:4222"),
    "mqtt": ("tidings.sim.perf.targets.mqtt", "MqttTarget", "mqtt://127.0.0.1:1883"),
    "redis": ("tidings.sim.perf.targets.redis", "RedisTarget", "redis://127.0.0.1:6379/0"),
}


def make_target(name: str, url: str | None, workload: Workload) -> Target:
    if name not in TARGETS:
        raise invalid("--target", f"unknown target {name!r}; one of {', '.join(TARGETS)}")
    module, cls, default_url = TARGETS[name]
    target: Target = getattr(importlib.import_module(module), cls)(url or default_url, workload)
    return target

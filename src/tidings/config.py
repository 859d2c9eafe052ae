"""Configuration: one typed object, built once (CLI flags > environment > defaults), passed down.

Nothing below the CLI reads the environment; it receives a `Settings`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from tidings.errors import ErrorCode, TidingsError

ENV_PREFIX = "TIDINGS_"
CONFIG_ENV = "TIDINGS_CONFIG"  # the configuration file's path, when no --config is given
MatchingMode = Literal["local", "spark", "elastic"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Input limits; each violation is a 4xx naming the field."""

    max_publication_bytes: int = 256 * 1024
    max_topics_per_publication: int = 64
    max_topic_length: int = 255
    max_topic_segments: int = 32
    # a filter with a wildcard: matching walks at most 2^(n+1) trie nodes per topic, however
    # many filters there are (2^32 with max_topic_segments: one tenant froze the broker)
    max_pattern_segments: int = 8
    max_attributes: int = 64
    max_predicates: int = 32
    # an `in` list's values, and a predicate's string value: a subscription's memory in the
    # index grows with both (12,000 values cost 46 MB per 100 subscriptions)
    max_in_values: int = 256
    # registrations a client address may make a minute (the bucket holds as many; loopback
    # clients, this machine's tools and simulator, only when `rate_limit_loopback`), and open
    # push streams: in all, and per subscriber
    registrations_per_minute: int = 60
    rate_limit_loopback: bool = False
    max_streams: int = 2048
    max_streams_per_subscriber: int = 16
    # one subscriber's queue, at most (its dead letters apart), and what happens past it, as
    # RabbitMQ's max-length: dead-letter-oldest (drop-head) or refuse-new (reject-publish)
    max_queue_messages: int = 1_000_000
    max_queue_bytes: int = 1024**3
    queue_overflow: str = "dead-letter-oldest"
    # below this much free disk under data_dir publishing answers 507 (RabbitMQ's disk alarm)
    min_free_disk_bytes: int = 64 * 1024 * 1024
    max_predicate_string: int = 1024
    max_topics_per_subscription: int = 256
    max_subscriptions_per_subscriber: int = 1000
    # `contains` needles' characters (matching/needles.py: an automaton of ~85-245 bytes and
    # ~1.3-2.5 us of build a character, rebuilt on the event loop every 64 new needles): one
    # subscriber's, counted from the store (16 MB, 0.16 s at most), and the whole broker's
    # (128 MB, 1.3 s at most; the 32,000 needles of 9 characters fit)
    max_contains_chars_per_subscriber: int = 65_536
    max_contains_chars: int = 524_288
    # subscriptions' stored bodies (their JSON) in bytes: one subscriber's, counted from the
    # store, and the whole broker's, counted by its index. The index holds ~1.7x a body's
    # bytes in memory (~2.7x just after a restart; issue #28's F3: 1,000 bodies of ~120 KB
    # took 208 MB): 4 MiB is ~7-11 MB a subscriber (1,000 subscriptions of 4 KiB, or 32 of
    # the largest a body may be), 512 MiB ~0.9-1.4 GB a broker (a million of ~500 bytes)
    max_subscription_bytes_per_subscriber: int = 4 * 1024 * 1024
    max_subscription_bytes: int = 512 * 1024 * 1024
    max_function_types: int = 16
    max_batch: int = 1000
    max_code_bytes: int = 64 * 1024
    # nesting of a JSON value a client sends (publication data, parameters); at most
    # model.JSON_DEPTH_CEILING, so that every answer carrying it can still be encoded
    max_json_depth: int = 64
    # a publication's dedup_id is remembered this long (JetStream's duplicate window)
    dedup_window_s: float = 120.0


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Peek-lock queue semantics, as SQS or Service Bus."""

    visibility_timeout_s: float = 30.0
    max_attempts: int = 5
    retention_s: float = 7 * 24 * 3600.0
    max_wait_s: float = 20.0
    max_pull: int = 100
    prefetch: int = 100
    # a push stream's unacknowledged messages' bytes, at most (one larger message alone)
    stream_inflight_bytes: int = 1024 * 1024
    # one subscriber's queue operations (a pull's lease, ack, nack, dead letters) doing work
    # at once, at most; the rest wait in FIFO order (issue #28); 0: no bound
    max_concurrent_ops_per_subscriber: int = 2


@dataclass(frozen=True, slots=True)
class FunctionSettings:
    """Limits for subscriber-supplied matching functions."""

    workers: int = 2
    cpu_ms: int = 100
    memory_mib: int = 256
    # one call of the library (builtins, /api/Detect*): CPU seconds, its worker's and the
    # OCR's tesseract child's together, read by the parent (a busy machine slows a call, it
    # does not end it); the wall clock only as the last resort, far past it
    builtin_cpu_s: float = 10.0
    builtin_wall_s: float = 120.0
    # a URL call's whole time, retries included, from its first connection to its answer's
    # last byte
    url_timeout_s: float = 2.0
    url_concurrency: int = 64  # URL calls in flight at once, all subscribers together
    # fair shares of them (docs/functions.md): one subscriber's calls in flight at most, and
    # waiting at most (more are shed at once, as failures of that subscriber)
    url_concurrency_per_subscriber: int = 8
    url_queue_per_subscriber: int = 256
    # networks URL functions never reach: the defaults (tidings.networks.DEFAULT_DENIED),
    # unless told to drop them, and these, comma-separated, added to them
    url_deny_networks: str = ""
    url_deny_default_networks: bool = True
    # networks exempted from the defaults alone (comma-separated): "127.0.0.0/8" lets URL
    # functions call this machine's services, while the metadata services stay denied
    url_allow_networks: str = ""
    url_retries: int = 2
    failures_to_suspend: int = 5
    # the OS boundary (docs/sandbox.md): bubblewrap, the uid/gid a root broker's workers drop
    # to, and the operator's explicit opt-out where the kernel refuses the boundary
    launcher: str = "bwrap"
    sandbox_uid: int = 65534
    sandbox_gid: int = 65534
    unsafe_code_functions: bool = False
    # false: code functions are refused without probing for the boundary (a serverless
    # platform grants no namespaces); builtin and url functions still work
    code_functions: bool = True
    # fairness: a subscriber whose calls failed or ran slow is evaluated apart, on its own
    # workers, one evaluation at a time with at most this many waiting
    quarantine_workers: int = 1
    quarantine_queue: int = 4
    slow_call_ms: float = 25.0
    # turns a subscriber keeps in a row while more of its evaluations wait (its worker, once
    # started, serves its backlog: a start costs about a second on a loaded machine)
    turn_burst: int = 16
    # tenants (docs/sandbox.md): a code worker serves one subscriber for life; at most this
    # many live (the least recently used idle one is killed past it), a few started ahead
    max_workers: int = 8  # full workers (each about 150 MB: the library); a lean one is a sixth
    spare_workers: int = 1
    # the library's inputs (docs/functions.md): images past this many pixels and texts past
    # this many bytes are refused before any work; /api/Detect* per client address
    max_image_pixels: int = 40_000_000
    max_text_bytes: int = 100_000
    detect_rate_per_s: float = 10.0
    detect_burst: int = 20
    detect_concurrency: int = 4  # /api/Detect* bodies parsed and worked on at once, in all
    detect_reads_per_client: int = 2  # /api/Detect* bodies read at once from one client
    detect_reads: int = 32  # ... and from all clients


@dataclass(frozen=True, slots=True)
class HTTPSettings:
    """Connections: how long an idle kept-alive one stays open (uvicorn's 5 s default drops
    clients that pause between requests), the WebSocket keep-alive pings, and the bounds no
    client can lift (tidings.connections): header size and count, the deadlines for a
    request's headers and body, connections at once, a client's WebSocket frame."""

    keep_alive_s: int = 75  # as nginx's default; longer than most clients' idle pools
    ws_ping_interval_s: float = 20.0
    ws_ping_timeout_s: float = 20.0
    max_header_bytes: int = 64 * 1024  # a request's line and headers together
    max_headers: int = 100
    header_timeout_s: float = 10.0  # from a connection's opening or a request's first byte
    body_timeout_s: float = 60.0  # from a request's headers to its body's last byte
    # a body's least rate (bytes/s), as mod_reqtimeout's MinRate: after `body_rate_grace_s`
    # each second must be paid for by that many bytes, else 408 and the connection closes
    # (a trickled body holds no read for body_timeout_s); 0: off
    body_min_rate: int = 1024
    body_rate_grace_s: float = 5.0
    max_connections: int = 2048  # connections and requests at once; past it: 503
    # open connections (WebSockets included) one client address may hold (an IPv6 client's
    # /64); past it a new one is answered 503 and closed, as nginx's limit_conn. 0: no bound.
    # Loopback clients (this machine's tools, benchmarks and simulator, a local proxy) are
    # counted only with `limit_loopback`, as limits.rate_limit_loopback
    max_connections_per_address: int = 256
    limit_loopback: bool = False
    # proxies whose X-Forwarded-For / X-Forwarded-Proto name the client (comma-separated
    # addresses, as uvicorn's forwarded_allow_ips); empty: none, a client is its connection's
    # address (trusting this machine's by default let any local client pick the address the
    # rate limits count against)
    trusted_proxies: str = ""
    ws_max_frame_bytes: int = 1024 * 1024  # a subscriber's frames are acknowledgements
    # pings a WebSocket client may send in a second; past it the stream is closed 1008 (each
    # is answered at once: a client reading its pongs held others' pulls 5 s). 0: no bound
    ws_max_pings_per_s: int = 100
    # names the broker answers to besides addresses, localhost and public_url's host ("*":
    # any, as behind a proxy that checks them), and web origins allowed to change state
    allowed_hosts: str = ""
    allowed_origins: str = ""


@dataclass(frozen=True, slots=True)
class AccessSettings:
    """Who may register and publish (tidings.broker.access): anyone, unless keys are set."""

    registration_key: str = ""  # registering then needs it as the bearer token
    publish_keys: str = ""  # KEY=PREFIX|PREFIX,KEY2=*: publishing then needs one


@dataclass(frozen=True, slots=True)
class SubscriptionSettings:
    """How this broker's index follows the store's subscriptions (with a shared store)."""

    # a change made through another broker is matched here within this bound (seconds)
    staleness_s: float = 1.0
    # the store's change log keeps this many versions: a broker further behind reads all anew
    change_log_versions: int = 100_000


@dataclass(frozen=True, slots=True)
class SubscriberSettings:
    """How long subscribers live unseen (tidings.delivery.presence)."""

    idle_expiry_s: float = 0.0  # 0: never; else delete subscribers unseen for this long
    ephemeral_grace_s: float = 30.0  # an ephemeral one without a stream or a call, deleted


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """Push to subscribers' HTTP endpoints (tidings.delivery.webhooks)."""

    batch_size: int = 100  # messages per POST, at most
    timeout_s: float = 10.0  # per request: connecting, sending and reading the answer
    concurrency: int = 4  # requests in flight per endpoint
    backoff_base_s: float = 1.0  # a failed batch comes back after U(0, base * 2^(attempt-1))
    backoff_cap_s: float = 600.0  # ... capped at this (Pub/Sub's push: 10 minutes)
    # consecutive failed requests that pause an endpoint: it is then probed, one request at a
    # time, and resumes by itself once one succeeds
    failures_to_pause: int = 10
    # networks webhooks never reach: the defaults, unless dropped, and these added to them
    deny_networks: str = ""
    deny_default_networks: bool = True
    # networks exempted from the defaults alone (comma-separated): "127.0.0.0/8" lets
    # webhooks reach receivers on this machine, while the metadata services stay denied
    allow_networks: str = ""
    # bytes a second all webhooks together may send one host (tidings.delivery.hosts); 0: no cap
    host_bytes_per_s: int = 1024 * 1024
    # the key sealing webhook secrets in the store (tidings.delivery.sealing); empty:
    # data_dir/secrets.key, made at the first start. Brokers sharing a store share this file.
    secrets_key_file: str = ""
    # the key itself (Fernet, url-safe base64), before the file: where instances share
    # nothing but their environment (serverless functions)
    secrets_key: str = ""


@dataclass(frozen=True, slots=True)
class ElasticSettings:
    """`matching = "elastic"` (tidings.elastic): the coordinator and the initial layers."""

    zookeeper: str = ""  # HOST:PORT[,...]; empty: a ZooKeeper of its own (Debian's package)
    cluster: str = "default"
    matchers: int = 1
    exit_points: int = 1
    autoscale: bool = False  # the autoscaler (tidings.elastic.hosting.autoscaler), off by default
    # the operators' inboxes (with a named ZooKeeper: TCP); 0.0.0.0 lets other machines'
    # matchers and exit points reach them, over CURVE with the cluster key: `key_file`, or
    # data_dir/elastic-cluster.key made at the first start (tidings.elastic.protocol.curve)
    host: str = "127.0.0.1"
    key_file: str = ""
    # an operator of another process unreachable this long (its connection lost, not back)
    # is evicted and replaced: seconds, 0 leaves it to its ZooKeeper session's expiry
    unreachable_s: float = 1.0


LogLevel = Literal["debug", "info", "warning", "error"]
LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error")


@dataclass(frozen=True, slots=True)
class ServerlessSettings:
    """Running as functions (tidings.serverless, docs/serverless.md)."""

    # stateless: nothing runs between requests, where a frozen function instance would stall
    # it; each request reads the subscription changes once they are older than the staleness
    # bound, and housekeeping is the scheduled handler's (or `tidings serverless housekeeping`)
    enabled: bool = False
    # how long one scheduled housekeeping invocation pushes webhooks before it returns
    push_s: float = 40.0


@dataclass(frozen=True, slots=True)
class LogSettings:
    """What the broker logs, and how (tidings.logs)."""

    level: LogLevel = "info"
    format: Literal["text", "json"] = "text"
    access_log: bool = False  # one line per HTTP request: off, as it costs at high rates


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path(".tidings")
    store_url: str = ""  # empty: SQLite at data_dir/tidings.db; or postgresql://...
    matching: MatchingMode = "local"
    event_log: bool = True
    log_rotate_bytes: int = 16 * 1024 * 1024
    log_rotate_s: float = 60.0
    # finished event-log files kept (the pipeline reads them): the newest, within both
    log_retention_s: float = 7 * 24 * 3600.0
    log_retention_bytes: int = 1024**3
    public_url: str = ""  # base URL used in queue URLs; empty: derived from the request
    admin_token: str = ""  # empty: made at the first start, kept in data_dir (tidings.admin)
    limits: Limits = field(default_factory=Limits)
    queues: QueueSettings = field(default_factory=QueueSettings)
    functions: FunctionSettings = field(default_factory=FunctionSettings)
    logs: LogSettings = field(default_factory=LogSettings)
    subscribers: SubscriberSettings = field(default_factory=SubscriberSettings)
    subscriptions: SubscriptionSettings = field(default_factory=SubscriptionSettings)
    access: AccessSettings = field(default_factory=AccessSettings)
    http: HTTPSettings = field(default_factory=HTTPSettings)
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    elastic: ElasticSettings = field(default_factory=ElasticSettings)
    serverless: ServerlessSettings = field(default_factory=ServerlessSettings)

    @property
    def resolved_store_url(self) -> str:
        """The store URL, defaulting to the embedded SQLite file under data_dir."""
        return self.store_url or f"sqlite:///{self.data_dir / 'tidings.db'}"

    @property
    def secrets_key_path(self) -> Path:
        """The key sealing webhook secrets at rest (tidings.delivery.sealing)."""
        return Path(self.webhooks.secrets_key_file or self.data_dir / "secrets.key")

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"


def _coerce(name: str, raw: str, current: Any) -> Any:
    try:
        if isinstance(current, bool):
            if raw.lower() not in {"1", "0", "true", "false", "yes", "no"}:
                raise ValueError(raw)
            return raw.lower() in {"1", "true", "yes"}
        if isinstance(current, Path):
            return Path(raw)
        return type(current)(raw)
    except ValueError:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field=name, detail=f"{name}={raw!r} is not a valid value"
        ) from None


Source = Literal["default", "file", "environment", "flag"]


def _apply(
    obj: Any,
    prefix: str,
    env: Mapping[str, str],
    overrides: Mapping[str, Any],
    file: Mapping[str, Any],
    said: dict[str, Source],
) -> Any:
    changes: dict[str, Any] = {}
    for f in fields(obj):
        current = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(current):
            changes[f.name] = _apply(current, f"{key}__", env, overrides, file, said)
        elif key in overrides and overrides[key] is not None:
            value = overrides[key]
            changes[f.name], said[key] = (
                (Path(value) if isinstance(current, Path) else value),
                "flag",
            )
        elif (ENV_PREFIX + key).upper() in env:
            raw = env[(ENV_PREFIX + key).upper()]
            changes[f.name], said[key] = _coerce(key, raw, current), "environment"
        elif key in file:
            changes[f.name], said[key] = file[key], "file"
        else:
            said[key] = "default"
    return dataclasses.replace(obj, **changes)


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config: Path | None = None,
    base: Settings | None = None,
) -> Settings:
    """Build settings: explicit overrides (CLI flags) > environment (TIDINGS_*) > the
    configuration file (`config`, else `TIDINGS_CONFIG`; tidings.toml) > defaults.

    Nested fields are addressed as `queues__max_attempts` (env `TIDINGS_QUEUES__MAX_ATTEMPTS`,
    `[queues] max_attempts` in the file). `base` replaces the defaults (the serverless
    handlers' own).
    """
    return explain(overrides, env, config, base)[0]


def explain(
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config: Path | None = None,
    base: Settings | None = None,
) -> tuple[Settings, dict[str, Source]]:
    """`load_settings`, and where each setting's value came from (`tidings config show`)."""
    from tidings.configfile import read_config

    env = os.environ if env is None else env
    path = config or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    file = read_config(path, Settings()) if path is not None else {}
    said: dict[str, Source] = {}
    settings = _apply(base or Settings(), "", env, overrides or {}, file, said)
    if settings.matching not in ("local", "spark", "elastic"):
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="matching",
            detail="matching must be local, spark or elastic",
        )
    _check_elastic(settings.elastic)
    if not 1 <= settings.port <= 65535:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field="port", detail=f"port {settings.port} is not 1-65535"
        )
    _check_logs(settings.logs)
    _check_http(settings.http)
    _check_queues(settings.queues)
    _check_subscribers(settings.subscribers)
    _check_subscriptions(settings.subscriptions)
    _check_access(settings.access)
    _check_limits(settings.limits)
    _check_webhooks(settings.webhooks)
    _check_functions(settings.functions)
    _check_networks("functions__url_deny_networks", settings.functions.url_deny_networks)
    _check_networks("webhooks__deny_networks", settings.webhooks.deny_networks)
    _check_networks("functions__url_allow_networks", settings.functions.url_allow_networks)
    _check_networks("webhooks__allow_networks", settings.webhooks.allow_networks)
    if not 0 <= settings.serverless.push_s <= 900:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="serverless__push_s",
            detail="serverless.push_s is 0 to 900 seconds (Lambda's longest invocation)",
        )
    return settings, said


def _check_networks(name: str, text: str) -> None:
    from tidings.networks import networks

    try:
        networks(text)
    except ValueError as exc:
        raise TidingsError(ErrorCode.CONFIG_INVALID, field=name, detail=f"{name}: {exc}") from None


def _check_http(http: HTTPSettings) -> None:
    rules = {
        "max_connections_per_address": (
            http.max_connections_per_address >= 0,
            "at least 0 (0: no bound)",
        ),
        "body_min_rate": (http.body_min_rate >= 0, "at least 0 (0: off)"),
        "body_rate_grace_s": (http.body_rate_grace_s >= 0, "at least 0"),
    }
    for name, (ok, rule) in rules.items():
        if not ok:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field=f"http__{name}", detail=f"http.{name} is {rule}"
            )


def _check_queues(q: QueueSettings) -> None:
    rules = {
        "stream_inflight_bytes": (q.stream_inflight_bytes >= 1024, "at least 1024"),
        "max_concurrent_ops_per_subscriber": (
            q.max_concurrent_ops_per_subscriber >= 0,
            "at least 0 (0: no bound)",
        ),
    }
    for name, (ok, rule) in rules.items():
        if not ok:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field=f"queues__{name}", detail=f"queues.{name} is {rule}"
            )


def _check_elastic(elastic: ElasticSettings) -> None:
    for name, count in (("matchers", elastic.matchers), ("exit_points", elastic.exit_points)):
        if not 1 <= count <= 64:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID,
                field=f"elastic__{name}",
                detail=f"--{name.replace('_', '-')} is 1 to 64",
            )
    if not 0 <= elastic.unreachable_s <= 3600:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="elastic__unreachable_s",
            detail="elastic.unreachable_s is 0 (off) to 3600 seconds",
        )


OVERFLOWS = ("dead-letter-oldest", "refuse-new")


def _check_limits(limits: Limits) -> None:
    if limits.queue_overflow not in OVERFLOWS:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="limits__queue_overflow",
            detail=f"the queue overflow policy is {' or '.join(OVERFLOWS)}",
        )
    if limits.max_queue_messages < 1 or limits.max_queue_bytes < 1:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="limits__max_queue_messages",
            detail="a queue holds at least 1 message and 1 byte",
        )


def _check_access(access: AccessSettings) -> None:
    from tidings.keys import publisher_keys

    try:
        publisher_keys(access.publish_keys)
    except ValueError as exc:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field="access__publish_keys", detail=f"publish_keys: {exc}"
        ) from None


def _check_subscriptions(subscriptions: SubscriptionSettings) -> None:
    if not 0 < subscriptions.staleness_s <= 3600:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="subscriptions__staleness_s",
            detail="the staleness bound is above 0 and at most 3600 seconds",
        )
    if subscriptions.change_log_versions < 1:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="subscriptions__change_log_versions",
            detail="the change log keeps at least 1 version",
        )


def _check_subscribers(subscribers: SubscriberSettings) -> None:
    if subscribers.ephemeral_grace_s <= 0:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="subscribers__ephemeral_grace_s",
            detail="the grace of ephemeral subscribers must be above 0 seconds",
        )
    if subscribers.idle_expiry_s < 0:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="subscribers__idle_expiry_s",
            detail="idle expiry is 0 (off) or a number of seconds",
        )


def _check_webhooks(w: WebhookSettings) -> None:
    rules = {
        "batch_size": (w.batch_size >= 1, "at least 1 message"),
        "timeout_s": (w.timeout_s > 0, "above 0 seconds"),
        "concurrency": (w.concurrency >= 1, "at least 1 request"),
        "backoff_base_s": (w.backoff_base_s >= 0, "0 seconds or more"),
        "backoff_cap_s": (w.backoff_cap_s >= w.backoff_base_s, "at least the base"),
        "failures_to_pause": (w.failures_to_pause >= 1, "at least 1 failure"),
    }
    for name, (ok, rule) in rules.items():
        if not ok:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field=f"webhooks__{name}", detail=f"{name}: {rule}"
            )


def _check_functions(f: FunctionSettings) -> None:
    rules = {
        "max_workers": (f.max_workers >= 1, "at least 1 worker"),
        "builtin_cpu_s": (f.builtin_cpu_s > 0, "above 0 seconds"),
        "builtin_wall_s": (
            f.builtin_wall_s >= f.builtin_cpu_s * 2,
            "at least twice functions.builtin_cpu_s",
        ),
        "turn_burst": (f.turn_burst >= 1, "at least 1 turn"),
        "url_timeout_s": (f.url_timeout_s > 0, "above 0 seconds"),
        "url_concurrency": (f.url_concurrency >= 1, "at least 1 call"),
        "url_concurrency_per_subscriber": (f.url_concurrency_per_subscriber >= 1, "at least 1"),
        "url_queue_per_subscriber": (f.url_queue_per_subscriber >= 1, "at least 1 call"),
        "max_image_pixels": (f.max_image_pixels >= 1, "at least 1 pixel"),
        "max_text_bytes": (f.max_text_bytes >= 1, "at least 1 byte"),
        "detect_rate_per_s": (f.detect_rate_per_s > 0, "above 0 calls a second"),
        "detect_burst": (f.detect_burst >= 1, "at least 1 call"),
        "detect_concurrency": (f.detect_concurrency >= 1, "at least 1 call"),
        "detect_reads_per_client": (f.detect_reads_per_client >= 1, "at least 1 body"),
        "detect_reads": (f.detect_reads >= 1, "at least 1 body"),
    }
    for name, (ok, rule) in rules.items():
        if not ok:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field=f"functions__{name}", detail=f"{name}: {rule}"
            )


def _check_logs(logs: LogSettings) -> None:
    if logs.level not in LOG_LEVELS:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="logs__level",
            detail=f"the log level is one of {', '.join(LOG_LEVELS)}",
        )
    if logs.format not in ("text", "json"):
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field="logs__format", detail="the log format is text or json"
        )

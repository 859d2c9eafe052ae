"""Price tables: serverless tariffs per provider, and monthly prices per instance type."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tidings.cost.files import Doc, Header, Table, header, number, read, subtable, text
from tidings.errors import invalid

SERVERLESS_DEFAULT = "serverless-hafeez-2018.toml"
INSTANCES_DEFAULT = "instances-lindmark-jarvela-2019.toml"
# The usage a serverless provider is billed for, in the order a bill lists them.
ITEMS = ("compute", "executions", "queue_requests", "storage")


@dataclass(frozen=True, slots=True)
class Tariff:
    """`price` per `per` units above a monthly `free` grant, for quantities up to `up_to`."""

    service: str
    unit: str
    free: float
    price: float
    per: float
    up_to: float | None = None
    chunk_kb: float | None = None  # queue requests: one request per started chunk of payload


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    label: str
    tariffs: dict[str, Tariff]


@dataclass(frozen=True, slots=True)
class ServerlessPrices:
    header: Header
    providers: dict[str, Provider]


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One row of the instance price table (a VM type; placement's `Instance` is a problem)."""

    name: str
    platform: str
    monthly: float
    vcpus: int | None = None


@dataclass(frozen=True, slots=True)
class InstancePrices:
    header: Header
    instances: dict[str, InstanceType]

    def get(self, name: str, field: str) -> InstanceType:
        """The instance called `name`; an unknown name is refused under `field`."""
        if name not in self.instances:
            known = ", ".join(self.instances)
            raise invalid(field, f"unknown instance {name!r}; the price table has {known}")
        return self.instances[name]


def load_serverless(path: Path | None = None) -> ServerlessPrices:
    """The serverless price table at `path`, or the thesis's (2018) when none is given."""
    doc = read(path, SERVERLESS_DEFAULT)
    providers = subtable(doc, doc.table, "providers", "providers")
    return ServerlessPrices(
        header(doc),
        {name: _provider(doc, name, table) for name, table in providers.items()},
    )


def _provider(doc: Doc, name: str, table: object) -> Provider:
    where = f"providers.{name}"
    if not isinstance(table, dict):
        raise invalid(doc.where(where), "must be a table")
    tariffs = {item: _tariff(doc, table, item, f"{where}.{item}") for item in ITEMS}
    return Provider(name, text(doc, table, "label", f"{where}.label"), tariffs)


def _tariff(doc: Doc, provider: Table, item: str, where: str) -> Tariff:
    table = subtable(doc, provider, item, where)
    per = number(doc, table, "per", f"{where}.per", default=1)
    if per == 0:
        raise invalid(doc.where(f"{where}.per"), "must be more than 0")
    return Tariff(
        service=text(doc, table, "service", f"{where}.service"),
        unit=text(doc, table, "unit", f"{where}.unit"),
        free=number(doc, table, "free", f"{where}.free", default=0),
        price=number(doc, table, "price", f"{where}.price"),
        per=per,
        up_to=_optional(doc, table, "up_to", f"{where}.up_to"),
        chunk_kb=_optional(doc, table, "chunk_kb", f"{where}.chunk_kb"),
    )


def _optional(doc: Doc, table: Table, key: str, where: str) -> float | None:
    if key not in table:
        return None
    value = number(doc, table, key, where)
    if value == 0:
        raise invalid(doc.where(where), "must be more than 0")
    return value


def load_instances(path: Path | None = None) -> InstancePrices:
    """The instance price table at `path`, or the RabbitMQ study's (2019) when none is given."""
    doc = read(path, INSTANCES_DEFAULT)
    instances = subtable(doc, doc.table, "instances", "instances")
    return InstancePrices(
        header(doc),
        {name: _instance(doc, name, table) for name, table in instances.items()},
    )


def _instance(doc: Doc, name: str, table: object) -> InstanceType:
    where = f"instances.{name}"
    if not isinstance(table, dict):
        raise invalid(doc.where(where), "must be a table")
    monthly = number(doc, table, "monthly", f"{where}.monthly")
    if monthly == 0:
        raise invalid(doc.where(f"{where}.monthly"), "must be more than 0 (Score divides by it)")
    vcpus = table.get("vcpus")
    if vcpus is not None and (isinstance(vcpus, bool) or not isinstance(vcpus, int) or vcpus < 1):
        raise invalid(doc.where(f"{where}.vcpus"), "must be a whole number >= 1")
    return InstanceType(name, text(doc, table, "platform", f"{where}.platform"), monthly, vcpus)

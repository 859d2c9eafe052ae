"""`tidings cost serverless | instances`: bills and price-performance tables from price files."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from tidings.cost import instances as perf
from tidings.cost.files import Header
from tidings.cost.prices import load_instances, load_serverless
from tidings.cost.serverless import Bill, Line, Usage, bill
from tidings.cost.throughputs import Throughput, load
from tidings.errors import invalid

Prices = Annotated[Path | None, typer.Option(help="A price table (TOML); default: the study's.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def serverless(
    prices: Prices = None,
    provider: Annotated[list[str] | None, typer.Option(help="Only this provider.")] = None,
    publications_per_month: Annotated[float, typer.Option(help="Publications per month.")] = 0,
    executions_per_publication: Annotated[
        float, typer.Option(help="Functions run per publication.")
    ] = 1,
    function_invocations: Annotated[
        float, typer.Option(help="Matching functions run per month.")
    ] = 0,
    deliveries: Annotated[float, typer.Option(help="Matches delivered per month.")] = 0,
    requests_per_delivery: Annotated[float, typer.Option(help="Queue requests per delivery.")] = 3,
    subscribers: Annotated[float, typer.Option(help="Subscribers (for their polls).")] = 0,
    polls_per_subscriber: Annotated[
        float, typer.Option(help="Queue polls per subscriber a month.")
    ] = 0,
    payload_kb: Annotated[float, typer.Option(help="Publication size, KB.")] = 1,
    memory_mb: Annotated[float, typer.Option(help="Function memory, MB.")] = 512,
    duration_ms: Annotated[float, typer.Option(help="Mean function duration, ms.")] = 1000,
    storage_gb: Annotated[float, typer.Option(help="Database storage, GB.")] = 0,
    executions: Annotated[
        float | None, typer.Option(help="Executions a month (overrides).")
    ] = None,
    queue_requests: Annotated[
        float | None, typer.Option(help="Queue requests a month (overrides).")
    ] = None,
    json: Json = False,
) -> None:
    """Itemised monthly bill per provider: the thesis's GB-s and executions arithmetic."""
    usage = Usage(
        publications_per_month, executions_per_publication, function_invocations, deliveries,
        requests_per_delivery, subscribers, polls_per_subscriber, payload_kb, memory_mb,
        duration_ms, storage_gb, executions, queue_requests,
    )  # fmt: skip
    table = load_serverless(prices)
    for name in provider or []:
        if name not in table.providers:
            raise invalid(
                "--provider", f"unknown provider {name!r}; have {', '.join(table.providers)}"
            )
    bills = [bill(usage, p) for n, p in table.providers.items() if not provider or n in provider]
    if json:
        _print_json(
            {
                "prices": _asdict(table.header),
                "usage": _asdict(usage),
                "bills": [_bill_json(b) for b in bills],
            }
        )
        return
    console = Console()
    _print_header(console, table.header)
    for b in bills:
        console.print(_bill_table(b, table.header.currency or ""))


def _bill_json(b: Bill) -> dict[str, Any]:
    return {
        "provider": b.provider,
        "label": b.label,
        "lines": [_asdict(x) for x in b.lines],
        "total": b.total,
    }


def _bill_table(b: Bill, currency: str) -> Table:
    table = Table(title=f"{b.label} ({b.provider})", title_justify="left")
    table.add_column("item")
    for column in ("quantity", "free", "billable", f"price {currency}", f"cost {currency}"):
        table.add_column(column, justify="right")
    for x in b.lines:
        amounts = (_amount(x.quantity), _amount(x.free), _amount(x.billable))
        table.add_row(f"{x.service} {x.unit}", *amounts, _price(x), f"{x.cost:,.2f}")
    table.add_row("total", "", "", "", "", f"{b.total:,.2f}", style="bold")
    return table


def _amount(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 or value == int(value) else f"{value:,.2f}"


def _price(x: Line) -> str:
    price = f"{x.price:.10f}".rstrip("0").rstrip(".")
    per = {1.0: "", 1e3: " /1k", 1e6: " /1M"}.get(x.per, f" /{x.per:g}")
    return price + per


def instances(
    prices: Prices = None,
    throughputs: Annotated[
        list[Path] | None,
        typer.Option(help="Measured throughputs: a TOML data file or `tidings perf --json` lines."),
    ] = None,
    instance: Annotated[
        str | None, typer.Option(help="The instance perf lines were run on.")
    ] = None,
    workload: Annotated[list[str] | None, typer.Option(help="Only this workload.")] = None,
    required: Annotated[
        list[float] | None, typer.Option(help="A required msgs/s (repeatable).")
    ] = None,
    step: Annotated[
        float, typer.Option(help="Without --required: rates step, 2 x step, ...")
    ] = perf.STEP,
    json: Json = False,
) -> None:
    """Score and Capacity per instance; first, second and third choice per required throughput."""
    table = load_instances(prices)
    paths: list[Path | None] = [*throughputs] if throughputs else [None]
    loaded = [load(path, instance) for path in paths]
    found: tuple[Throughput, ...] = tuple(t for m in loaded for t in m.throughputs)
    analyses = perf.analyse(table, found, required, step, workload)
    if json:
        sources = [_asdict(m.header) if m.header else None for m in loaded]
        _print_json(
            {
                "prices": _asdict(table.header),
                "throughputs": sources,
                "workloads": [_asdict(a) for a in analyses],
            }
        )
        return
    console = Console()
    _print_header(console, table.header)
    for m in loaded:
        if m.header:
            console.print(f"[dim]throughputs: {m.header.source} ({m.header.date})[/dim]")
    console.print(_maxima_table(table.instances, analyses, table.header.currency or ""))
    for a in analyses:
        console.print(_choice_table(a))
        if not a.rows:
            console.print(
                f"no instance reaches {step:g} msgs/s on {a.workload}: give a smaller --step"
            )


def _maxima_table(priced: dict[str, Any], analyses: list[perf.Analysis], currency: str) -> Table:
    table = Table(title="Monthly cost and maximum throughput (msgs/s)", title_justify="left")
    table.add_column("instance")
    table.add_column("platform")
    table.add_column(f"monthly {currency}", justify="right")
    for a in analyses:
        table.add_column(a.workload, justify="right")
    for name, inst in priced.items():
        tops = [a.maxima.get(name) for a in analyses]
        cells = [f"{t:,.0f}" if t is not None else "-" for t in tops]
        table.add_row(name, inst.platform, f"{inst.monthly:,.2f}", *cells)
    return table


def _choice_table(a: perf.Analysis) -> Table:
    table = Table(title=f"Price-performance, {a.workload}", title_justify="left")
    for column in ("Messages/s", "First choice", "Second choice", "Third choice"):
        table.add_column(column)
    for band in a.bands:
        cells = [_pick(p) for p in band.picks] + ["-"] * (perf.CHOICES - len(band.picks))
        table.add_row(_band_label(band), *cells)
    return table


def _band_label(band: perf.Band) -> str:
    if band.low == band.high:
        return f"Up to {_rate(band.low)}"
    return f"Up to {_rate(band.low)}-{_rate(band.high)}"


def _rate(value: float) -> str:
    return f"{value / 1000:g}k" if value % 1000 == 0 else f"{value:g}"


def _pick(p: perf.Pick) -> str:
    first, last = perf.percent(p.first_capacity), perf.percent(p.last_capacity)
    span = f"{first}%" if first == last else f"{first}% - {last}%"
    return f"{p.instance} ({span})"


def _print_header(console: Console, header: Header) -> None:
    console.print(
        f"[dim]prices: {header.source} ({header.date}, {header.currency}, {header.region})[/dim]"
    )


def _asdict(value: Any) -> dict[str, Any]:
    result: dict[str, Any] = dataclasses.asdict(value)
    return result


def _print_json(value: dict[str, Any]) -> None:
    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="cost",
        help="Cost models: serverless bills, instance price-performance.",
        no_args_is_help=True,
    )
    group.command()(serverless)
    group.command()(instances)
    app.add_typer(group)

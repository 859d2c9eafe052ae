"""Price tables: shipped, dated, and refused naming the field when malformed."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from tidings.cost.prices import load_instances, load_serverless
from tidings.cost.throughputs import load_toml
from tidings.errors import ErrorCode, TidingsError

SERVERLESS_HEAD = """
source = "a test"
date = "2024-01-31"
currency = "EUR"
region = "here"
"""
TARIFF = 'service = "S"\nunit = "u"\nprice = 1.5\n'


def serverless_file(tmp_path: Path, body: str, head: str = SERVERLESS_HEAD) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(head + body)
    return path


def provider(name: str, compute: str = TARIFF) -> str:
    items = {"compute": compute, "executions": TARIFF, "queue_requests": TARIFF, "storage": TARIFF}
    tables = "".join(f"[providers.{name}.{item}]\n{text}\n" for item, text in items.items())
    return f'[providers.{name}]\nlabel = "L"\n' + tables


def refusal(load: object, path: Path) -> TidingsError:
    with pytest.raises(TidingsError) as caught:
        load(path)  # type: ignore[operator]
    assert caught.value.code is ErrorCode.INVALID_FIELD
    return caught.value


def test_the_shipped_tables_say_whose_prices_and_as_of_when() -> None:
    thesis, study = load_serverless().header, load_instances().header
    assert (thesis.date, thesis.currency) == ("2018-11-21", "USD")
    assert "Hafeez" in thesis.source and "6.11" in thesis.source
    assert (study.date, study.currency) == ("2019", "USD")
    assert "7.1-7.3" in study.source and "Ireland" in study.region
    assert set(load_serverless().providers) == {"aws", "azure"}
    assert load_instances().instances["t3.xlarge"].monthly == 133.52
    assert len(load_instances().instances) == 11


def test_the_study_throughputs_say_they_are_recovered_from_chapter_7() -> None:
    measured = load_toml()
    assert measured.header is not None and "recovered" in measured.header.source
    assert len(measured.throughputs) == 32


def test_the_data_files_are_package_data() -> None:
    folder = resources.files("tidings.cost")
    shipped = {p.name for sub in ("prices", "measurements") for p in folder.joinpath(sub).iterdir()}
    assert {
        "serverless-hafeez-2018.toml",
        "instances-lindmark-jarvela-2019.toml",
        "rabbitmq-lindmark-jarvela-2019.toml",
    } <= shipped
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    assert '"**/*.toml"' in pyproject.read_text()


def test_a_user_price_table_replaces_the_shipped_one(tmp_path: Path) -> None:
    table = load_serverless(serverless_file(tmp_path, provider("mine")))
    assert table.header.currency == "EUR"
    assert table.providers["mine"].tariffs["compute"].price == 1.5
    assert table.providers["mine"].tariffs["compute"].free == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (provider("p", 'service = "S"\nunit = "u"\n'), "providers.p.compute.price"),
        (provider("p", TARIFF + "free = -1\n"), "providers.p.compute.free"),
        (provider("p", TARIFF + 'per = "million"\n'), "providers.p.compute.per"),
        (provider("p", TARIFF + "per = 0\n"), "providers.p.compute.per"),
        (
            provider("p").replace("[providers.p.storage]", "[providers.p.other]"),
            "providers.p.storage",
        ),
        ("", "providers"),
    ],
)
def test_a_malformed_serverless_table_is_refused_naming_the_field(
    tmp_path: Path, body: str, field: str
) -> None:
    path = serverless_file(tmp_path, body)
    assert refusal(load_serverless, path).field == f"{path}:{field}"


@pytest.mark.parametrize(
    ("head", "field"),
    [
        (SERVERLESS_HEAD.replace('date = "2024-01-31"', 'date = "last year"'), "date"),
        (SERVERLESS_HEAD.replace('region = "here"', ""), "region"),
        (SERVERLESS_HEAD.replace('currency = "EUR"', "currency = 3"), "currency"),
    ],
)
def test_a_table_without_its_provenance_is_refused(tmp_path: Path, head: str, field: str) -> None:
    path = serverless_file(tmp_path, provider("p"), head)
    assert refusal(load_serverless, path).field == f"{path}:{field}"


def test_a_file_that_is_not_toml_or_not_there_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text("source = \n")
    assert refusal(load_serverless, path).field == str(path)
    assert refusal(load_instances, tmp_path / "missing.toml").field == str(
        tmp_path / "missing.toml"
    )


@pytest.mark.parametrize(
    ("instance", "field"),
    [
        ('platform = "AWS"\nmonthly = 0\n', "instances.x.monthly"),
        ('platform = "AWS"\nmonthly = -3\n', "instances.x.monthly"),
        ("monthly = 10\n", "instances.x.platform"),
        ('platform = "AWS"\nmonthly = 10\nvcpus = 2.5\n', "instances.x.vcpus"),
    ],
)
def test_a_malformed_instance_table_is_refused_naming_the_field(
    tmp_path: Path, instance: str, field: str
) -> None:
    path = tmp_path / "instances.toml"
    path.write_text(SERVERLESS_HEAD + "[instances.x]\n" + instance)
    assert refusal(load_instances, path).field == f"{path}:{field}"


def test_an_unknown_instance_is_refused_naming_where_it_was_asked_for() -> None:
    with pytest.raises(TidingsError) as caught:
        load_instances().get("t4.nano", "--instance")
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_FIELD, "--instance")

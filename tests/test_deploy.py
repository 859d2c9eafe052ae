"""What `deploy/` ships is valid as its tools read it: the systemd unit, the AWS SAM template
(deploy/aws) and the Azure Functions project (deploy/azure)."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "deploy" / "aws" / "template.yaml"
AZURE = ROOT / "deploy" / "azure"
# what every instance must share, so each project must give it
SHARED = {"TIDINGS_STORE_URL", "TIDINGS_ADMIN_TOKEN", "TIDINGS_WEBHOOKS__SECRETS_KEY"}
# Azure's binding setting (the timer's schedule), not the broker's
SCHEDULE = "TIDINGS_HOUSEKEEPING_SCHEDULE"
CODE = "s3://tidings-code/tidings.zip"  # where `sam deploy` would have put build/


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("systemd-analyze is required under CI (Debian: apt-get install systemd)")
        pytest.skip("systemd-analyze is not installed")
    unit = (ROOT / "deploy" / "tidings.service").read_text()
    # verify checks that ExecStart's program exists: point it at this environment's
    tidings = Path(sys.executable).with_name("tidings")
    here = tmp_path / "tidings.service"
    here.write_text(unit.replace("/opt/tidings/bin/tidings", str(tidings)))
    done = subprocess.run([analyze, "verify", str(here)], capture_output=True, text=True)
    said = [line for line in done.stderr.splitlines() if "tidings.service" in line]
    assert done.returncode == 0 and said == [], done.stderr


# -- AWS: the SAM template


def _lint(text: str) -> list[str]:
    """cfn-lint's errors and warnings about a template (its default rules, us-east-1)."""
    from cfnlint.api import lint

    return [str(match) for match in lint(text)]


def _template() -> dict[str, Any]:
    """The template as CloudFormation reads it (short-form tags such as !Ref decoded)."""
    from cfnlint.decode import decode_str

    template, errors = decode_str(TEMPLATE.read_text())
    assert not errors and template is not None, errors
    return json.loads(json.dumps(template))  # plain dicts and lists


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each AWS::Serverless::Function's properties, with the template's Globals under them."""
    common = template.get("Globals", {}).get("Function", {})
    return {
        name: {**common, **resource.get("Properties", {})}
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def test_the_sam_template_passes_cfn_lint() -> None:
    assert _lint(TEMPLATE.read_text()) == []


def test_cfn_lint_refuses_a_copy_of_the_template_with_a_fault() -> None:
    text = TEMPLATE.read_text()
    faulty = text.replace("MemorySize: !Ref MemorySize", "MemorySize: lots")
    assert faulty != text, "the fault was not planted: the template changed shape"
    said = _lint(faulty)
    assert any("'lots'" in line for line in said), said


# Lambda's Python runtimes this package supports (Python 3.11 and newer), and its longest run
RUNTIMES = {"python3.11", "python3.12", "python3.13"}
LAMBDA_MAX_TIMEOUT_S = 900
# names a !Ref, !GetAtt or ${} may point at beside the template's own parameters and
# resources: pseudo-parameters, and what the SAM transform makes of the functions (an HTTP
# API event makes ServerlessHttpApi; FunctionUrlConfig makes <function>Url)
MADE = {"AWS::Region", "AWS::URLSuffix", "AWS::NoValue", "AWS::StackName", "AWS::AccountId",
        "ServerlessHttpApi", "ApiFunctionUrl"}  # fmt: skip


def _names_pointed_at(node: Any) -> set[str]:
    """Every name a !Ref, !GetAtt or !Sub's ${...} in `node` points at."""
    if isinstance(node, list):
        return set().union(*map(_names_pointed_at, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    names: set[str] = set()
    for key, value in node.items():
        if key == "Ref" and isinstance(value, str):
            names.add(value)
        elif key == "Fn::GetAtt":
            names.add(value[0] if isinstance(value, list) else value.split(".")[0])
        elif key == "Fn::Sub":
            text = value if isinstance(value, str) else value[0]
            names |= {n.split(".")[0] for n in re.findall(r"\$\{([^}!]+)\}", text)}
        names |= _names_pointed_at(value)
    return names


def test_the_template_names_only_what_exists_and_what_lambda_runs() -> None:
    # cfn-lint 1.x checks a SAM template's own resources against SAM's schema: types and
    # shapes, not the runtimes, the timeouts' range or the names a !Ref points at, which only
    # the SAM transform's output would show (aws-sam-translator cannot be installed beside
    # this project's pins: it wants pydantic 2.13 and python-dateutil 2). So, here:
    template = _template()
    known = set(template["Parameters"]) | set(template["Resources"]) | MADE
    pointed = _names_pointed_at(
        {k: v for k, v in template.items() if k in ("Globals", "Resources", "Outputs")}
    )
    assert pointed and pointed <= known, pointed - known
    for name, properties in _functions(template).items():
        assert properties["Runtime"] in RUNTIMES, name
        assert 1 <= properties["Timeout"] <= LAMBDA_MAX_TIMEOUT_S, name


def test_the_template_check_bites_on_a_dangling_ref_and_a_runtime_lambda_lacks() -> None:
    template = _template()
    template["Globals"]["Function"]["Environment"]["Variables"]["TIDINGS_STORE_URL"] = {
        "Ref": "StoreURL"
    }
    known = set(template["Parameters"]) | set(template["Resources"]) | MADE
    assert "StoreURL" in _names_pointed_at(template["Globals"]) - known
    template["Globals"]["Function"]["Runtime"] = "python9.99"
    assert _functions(template)["ApiFunction"]["Runtime"] not in RUNTIMES


def test_the_template_fronts_every_route_and_runs_housekeeping_every_minute() -> None:
    template = _template()
    functions = _functions(template)
    assert set(functions) == {"ApiFunction", "HousekeepingFunction"}
    api, housekeeping = functions["ApiFunction"], functions["HousekeepingFunction"]
    assert api["Handler"] == "tidings.serverless.aws.handler"
    routes = {
        (event["Properties"]["Path"], event["Properties"]["Method"])
        for event in api["Events"].values()
        if event["Type"] == "HttpApi"
    }
    assert routes == {("/", "ANY"), ("/{proxy+}", "ANY")}
    assert api["FunctionUrlConfig"]["AuthType"] == "NONE"
    assert housekeeping["Handler"] == "tidings.serverless.aws.housekeeping"
    schedules = [event["Properties"]["Schedule"] for event in housekeeping["Events"].values()]
    assert schedules == ["rate(1 minute)"]
    # its webhook pushes run 40 s by default: it is given 60 s or more
    assert housekeeping["Timeout"] >= 60
    for properties in functions.values():
        assert properties["Runtime"] == "python3.12"
        assert properties["Architectures"] == ["x86_64"]
        assert properties["CodeUri"] == "build/"
    for secret in ("StoreUrl", "AdminToken", "SecretsKey"):
        assert template["Parameters"][secret]["NoEcho"] is True
    assert template["Parameters"]["MemorySize"]["Default"] == 512
    assert set(template["Outputs"]) == {"ApiUrl", "FunctionUrl"}


def test_every_handler_in_the_template_is_a_callable_of_the_package() -> None:
    handlers = [properties["Handler"] for properties in _functions(_template()).values()]
    assert handlers
    for handler in handlers:
        module, _, name = handler.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name, None)), handler


# -- both projects: the settings they name


def _named_variables() -> dict[str, list[str]]:
    """Every TIDINGS_* name the deploy projects' files mention, with the files naming it (the
    folders' own files: not a build/ or .python_packages/ made in them)."""
    named: dict[str, list[str]] = {}
    for path in sorted([TEMPLATE, *AZURE.glob("*")]):
        if path.is_file():
            for name in set(re.findall(r"\bTIDINGS_[A-Z0-9_]*[A-Z0-9]", path.read_text())):
                named.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return named


def _settings_variables() -> set[str]:
    """The environment variables the broker reads: each Settings field, as config._apply
    names it (TIDINGS_<FIELD>, TIDINGS_<SECTION>__<FIELD>), and the configuration file's."""
    from tidings.config import CONFIG_ENV, ENV_PREFIX, explain

    _, said = explain(env={})  # every field's key, each from its default here
    return {(ENV_PREFIX + key).upper() for key in said} | {CONFIG_ENV}


def test_every_tidings_variable_the_deploy_projects_name_is_a_setting() -> None:
    settings = _settings_variables()
    assert "TIDINGS_STORE_URL" in settings and "TIDINGS_QUEUES__MAX_ATTEMPTS" in settings
    named = _named_variables()
    assert set(named) >= SHARED  # the walk reads the projects at all
    unknown = {name: files for name, files in named.items() if name not in settings}
    unknown.pop(SCHEDULE, None)
    assert unknown == {}, "named in deploy/ but not settings the broker reads"


def test_both_projects_give_every_instance_the_shared_store_token_and_key() -> None:
    for name, properties in _functions(_template()).items():
        assert set(properties["Environment"]["Variables"]) >= SHARED, name
    example = json.loads((AZURE / "local.settings.json.example").read_text())
    assert SHARED | {SCHEDULE} <= set(example["Values"])


# -- Azure: the Functions project


def _index_azure_project(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The functions of deploy/azure, found as the Python worker indexes a v2 app
    (azure_functions_worker.loader.index_function_app): function_app imported from the
    project's folder, its one module-level FunctionRegister, that register's functions."""
    from azure.functions import FunctionRegister

    monkeypatch.syspath_prepend(str(AZURE))
    monkeypatch.delitem(sys.modules, "function_app", raising=False)
    module = importlib.import_module("function_app")
    monkeypatch.delitem(sys.modules, "function_app")
    assert Path(module.__file__ or "").resolve() == (AZURE / "function_app.py").resolve()
    registers = [
        value
        for name in dir(module)
        if isinstance(value := getattr(module, name), FunctionRegister)
    ]
    assert len(registers) == 1, "the worker refuses none, or more than one, top-level app"
    return registers[0].get_functions()


def test_the_azure_project_indexes_an_anonymous_catch_all_http_function_and_a_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    functions = _index_azure_project(monkeypatch)
    # what the worker sends the host for each function: its name and raw bindings
    bindings = {
        function.get_function_name(): [json.loads(raw) for raw in function.get_raw_bindings()]
        for function in functions
    }
    assert len(bindings) == 2 and "housekeeping" in bindings
    (http_function,) = set(bindings) - {"housekeeping"}
    (http,) = [each for each in bindings[http_function] if each["type"] == "httpTrigger"]
    assert http["route"].lstrip("/") == "{*route}"
    assert http["authLevel"].lower() == "anonymous"
    assert {"GET", "POST", "PUT", "PATCH", "DELETE"} <= set(http["methods"])
    (timer,) = bindings["housekeeping"]
    assert timer["type"] == "timerTrigger"
    assert timer["schedule"] == f"%{SCHEDULE}%"


def test_the_azure_settings_example_runs_the_python_worker_and_a_valid_schedule() -> None:
    values = json.loads((AZURE / "local.settings.json.example").read_text())["Values"]
    assert values["FUNCTIONS_WORKER_RUNTIME"] == "python"
    assert "EnableWorkerIndexing" in values["AzureWebJobsFeatureFlags"].split(",")
    assert values["AzureWebJobsStorage"]  # the timer's lease needs a storage account
    # NCRONTAB: six fields, seconds first
    assert len(values[SCHEDULE].split()) == 6


def test_host_json_serves_the_broker_paths_without_a_prefix() -> None:
    host = json.loads((AZURE / "host.json").read_text())
    assert host["version"] == "2.0"
    assert host["extensionBundle"]["id"] == "Microsoft.Azure.Functions.ExtensionBundle"
    # "" so that /v1/... and /api/... reach the broker as they are (the default is "api")
    assert host["extensions"]["http"]["routePrefix"] == ""
    assert host["functionTimeout"] == "00:05:00"


def test_the_azure_requirements_pin_the_version_pyproject_declares() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    lines = (AZURE / "requirements.txt").read_text().split()
    assert lines == [f"tidings-broker[serverless]=={version}"]


def test_the_azure_package_leaves_out_local_settings() -> None:
    ignored = (AZURE / ".funcignore").read_text().split()
    assert "local.settings.json" in ignored

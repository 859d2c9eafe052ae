"""Subscriber code is checked at subscribe time; refusals name the line and the reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.sandbox.compile import MAX_DEPTH, check

ESCAPES = [
    "import os",
    "import subprocess as s",
    "from os import path",
    "import importlib",
    "import signal",
    "import socket",
    "import sys",
    "from . import x",
    "x = __import__('os')",
    "x = open('/etc/passwd')",
    "x = eval('1')",
    "x = exec('1')",
    "x = compile('1', 'f', 'exec')",
    "x = globals()",
    "x = getattr(1, 'real')",
    "x = ().__class__.__bases__[0].__subclasses__()",
    "x = (lambda: 0).__globals__",
    "x = '{0.__class__}'.format(1)",
    "x = type(1)",
    "x = vars()",
    "x = __builtins__",
    "x = breakpoint",
    "x = (lambda: (yield))().gi_frame.f_back.f_globals",
    "x = [].f_builtins",
]


@pytest.mark.parametrize("line", ESCAPES)
def test_escape_routes_are_refused_before_the_code_runs(line: str) -> None:
    with pytest.raises(TidingsError) as caught:
        check(f"def match(publication):\n    return True\n{line}\n")
    assert caught.value.code is ErrorCode.FUNCTION_FORBIDDEN
    assert caught.value.field == "function.code" and "line 3" in caught.value.message


def test_a_syntax_error_names_its_line() -> None:
    with pytest.raises(TidingsError) as caught:
        check("def match(publication):\n    return (\n")
    assert caught.value.code is ErrorCode.FUNCTION_INVALID and "line" in caught.value.message


def test_code_without_a_match_function_is_invalid() -> None:
    with pytest.raises(TidingsError) as caught:
        check("def other(p):\n    return True\n")
    assert caught.value.code is ErrorCode.FUNCTION_INVALID


def test_allowed_modules_and_the_function_library_may_be_imported() -> None:
    check(
        "import math, re, json\nfrom collections import Counter\n"
        "from tidings.functions import detect_language\n"
        "def match(publication):\n    return math.sqrt(4) == 2\n"
    )


HIDDEN_NAMES = {
    "class-pattern-dunder": "match publication:\n    case str(__reduce_ex__=r):\n        pass",
    "class-pattern-frame": "match publication:\n    case dict(gi_frame=f):\n        pass",
    "star-pattern": "match publication:\n    case [*__rest]:\n        pass",
    "mapping-rest": "match publication:\n    case {**__rest}:\n        pass",
    "capture-pattern": "match publication:\n    case int() as __x:\n        pass",
    "import-alias": "from math import pi as __pi",
    "imported-name": "from math import __loader__",
    "except-name": "try:\n    pass\nexcept Exception as __e:\n    pass",
    "keyword-argument": "x = dict(__x=1)",
}


@pytest.mark.parametrize("snippet", HIDDEN_NAMES.values(), ids=HIDDEN_NAMES.keys())
def test_names_hidden_in_patterns_imports_and_handlers_are_checked(snippet: str) -> None:
    with pytest.raises(TidingsError) as caught:
        check(f"def match(publication):\n    return True\n{snippet}\n")
    assert caught.value.code is ErrorCode.FUNCTION_FORBIDDEN
    assert caught.value.field == "function.code" and "line" in caught.value.message


FORMAT_ROUTES = {
    "built-at-run-time": 'x = ("{0." + "real}").format(1)',
    "attribute-field": 'x = "{0.real}".format(1)',
    "index-field": 'x = "{0[0]}".format([1])',
    "format-map-attribute": 'x = "{a.real}".format_map({"a": 1})',
    "format-map-on-a-name": "t = 'x'\nx = t.format_map({})",
    "unbound-str-format": 'x = str.format("{}", 1)',
    "field-nested-in-spec": 'x = "{0:{1.real}}".format(1, 2)',
    "bound-by-a-class-pattern": "match 'x':\n    case str(format=f):\n        pass",
    "format-map-bound-by-a-pattern": "match 'x':\n    case str(format_map=f):\n        pass",
}


@pytest.mark.parametrize("snippet", FORMAT_ROUTES.values(), ids=FORMAT_ROUTES.keys())
def test_format_is_refused_unless_a_literal_names_plain_fields(snippet: str) -> None:
    with pytest.raises(TidingsError) as caught:
        check(f"def match(publication):\n    return True\n{snippet}\n")
    assert caught.value.code is ErrorCode.FUNCTION_FORBIDDEN and ".format" in caught.value.message


def test_format_on_a_literal_with_plain_fields_is_allowed() -> None:
    check(
        "def match(publication):\n"
        '    a = "{} and {name:>10} {0!r:{1}}".format(1, 3, name="x")\n'
        '    b = "{k}".format_map({"k": 1})\n'
        "    return bool(a and b)\n"
    )


def test_ordinary_patterns_and_imports_are_allowed() -> None:
    check(
        "from math import pi as PI\n"
        "def match(publication):\n"
        "    match publication:\n"
        "        case {'data': str(text), **rest} if rest:\n"
        "            return PI > 3 and bool(text)\n"
        "        case [first, *others]:\n"
        "            return bool(first)\n"
        "        case _:\n"
        "            return False\n"
    )


def _returning(expression: str) -> str:
    return f"def match(publication):\n    return {expression}\n"


NESTED_TOO_DEEPLY = {
    "minus signs": "-" * (MAX_DEPTH + 1) + "1",
    "parentheses": "(" * 1_000 + "1" + ")" * 1_000,
    "lists": "[" * 1_000 + "]" * 1_000,
    "an attribute chain": "publication" + ".a" * 50_000,
    "subscripts": "publication" + "[0]" * 20_000,
    "nots": "not " * 50_000 + "True",
    "lambdas": "lambda: " * 1_000 + "1",
    "a long sum": "+".join(["1"] * 20_000),
    "conditionals": "1 if 1 else " * 1_000 + "1",
}


@pytest.mark.parametrize("expression", NESTED_TOO_DEEPLY.values(), ids=NESTED_TOO_DEEPLY.keys())
def test_code_nested_too_deeply_is_invalid_and_says_the_bound(expression: str) -> None:
    with pytest.raises(TidingsError) as caught:
        check(_returning(expression))
    assert caught.value.code is ErrorCode.FUNCTION_INVALID
    assert caught.value.field == "function.code"
    assert f"at most {MAX_DEPTH} levels" in caught.value.message


def test_code_as_deep_as_the_bound_is_allowed_and_compiles_in_a_worker() -> None:
    deepest = _returning("-" * (MAX_DEPTH - 4) + "1")  # module, def, return, the 1: four
    check(deepest)
    # a worker compiles under a recursion limit of 300 frames (sandbox/worker.py)
    script = f"import sys\nsys.setrecursionlimit(300)\ncompile({deepest!r}, 's', 'exec')\n"
    subprocess.run([sys.executable, "-c", script], check=True)


def test_format_fields_nested_deeper_than_str_format_reads_are_refused() -> None:
    check(_returning("'{0:{1:>3}}'.format(5, '>4')"))
    with pytest.raises(TidingsError) as caught:
        check(_returning("'{0:{1:{2}}}'.format(1, 2, 3)"))
    assert caught.value.code is ErrorCode.FUNCTION_FORBIDDEN and "nested" in caught.value.message
    with pytest.raises(TidingsError):
        check(_returning("'" + "{0:" * 20_000 + "}" * 20_000 + "'.format(1)"))

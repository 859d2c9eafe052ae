"""Subscriber code is checked at subscribe time; refusals name the line and the reason."""

from __future__ import annotations

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.sandbox.compile import check

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

"""Hostile subscriber code for the escape suite, and the canaries it hunts.

`ATTACK` is what code does once it has the real builtins (`b`) and `__import__` (`imp`):
read the broker's secret file and directory, read its environment, write a file into its
data directory, spawn `sh`, and open a socket to the broker to publish on the `pwned` topic.
It can only report success by matching (returning True), so a delivery to its subscriber
or a `pwned` publication is an escape.
"""

from __future__ import annotations

ENV_CANARY = "TIDINGS_ESCAPE_CANARY"

# Reaches the worker's real builtins from nothing but class patterns: a heap class's
# __reduce_ex__(1) hands back copyreg._reconstructor and `object`; `object` then matches
# any subject, so a class pattern binds __globals__. No '__' appears in any constant.
CLASS_PATTERN_CHAIN = """
class A:
    pass

def match(publication):
    p = publication["data"]
    u = "_" * 2
    match A():
        case A(__reduce_ex__=r):
            pass
    reduced = r(1)
    O = reduced[1][1]
    match reduced[0]:
        case O(__globals__=g):
            pass
    b = g[u + "builtins" + u]
    imp = b[u + "import" + u]
    main = imp("sys").modules[u + "main" + u]
    main.GUARD["on"] = False
    return attack(b, imp, p)
"""

ATTACK = """
def attack(b, imp, p):
    os = imp("os")
    seen = False
    try:
        seen = seen or b["open"](p["secret"]).read().startswith("canary-")
    except Exception:
        pass
    try:
        seen = seen or "secret.txt" in os.listdir(p["data_dir"])
    except Exception:
        pass
    try:
        seen = seen or p["env"] in os.environ
    except Exception:
        pass
    try:
        b["open"](p["write_to"], "w").write("x")
    except Exception:
        pass
    try:
        os.system("echo spawned > " + p["marker"])
    except Exception:
        pass
    try:
        body = '{"topics": ["pwned"], "data": "escaped"}'
        request = ("POST /v1/publications HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: "
                   "application/json\\r\\nContent-Length: " + str(len(body)) +
                   "\\r\\nConnection: close\\r\\n\\r\\n" + body)
        s = imp("socket").create_connection(("127.0.0.1", p["port"]), 2)
        s.sendall(request.encode())
        s.recv(100)
        s.close()
    except Exception:
        pass
    return bool(seen)
"""


def fmt_route(method: str) -> str:
    """The read-only route: a format string built at run time walks from `match` to the
    worker's `os.environ` (its fields index dictionaries with bare keys). `method`: format,
    format_map, or pattern (`case str(format=f)` binds the bound method)."""
    head = '"{m."' if method == "format_map" else '"{0."'
    call = {
        "format": "seen = field.format(match)",
        "format_map": 'seen = field.format_map({"m": match})',
        "pattern": "match field:\n        case str(format=f):\n            seen = f(match)",
    }[method]
    return f"""
def match(publication):
    u = "_" * 2
    field = ({head} + u + "globals" + u + "[" + u + "builtins" + u + "][" + u + "import" + u
             + "]." + u + "globals" + u + "[sys].modules[os].environ}}")
    {call}
    return publication["data"]["env"] in seen
"""


CLASSIC = {
    "subclasses": "def match(publication):\n"
    "    return len(().__class__.__bases__[0].__subclasses__()) > 0\n",
    "runtime-import": "def match(publication):\n"
    "    import json\n"
    "    return json.codecs.open(publication['data']['secret']).read() != ''\n",
    "frame-walk": "def match(publication):\n"
    "    g = (x for x in [1])\n"
    "    return g.gi_frame.f_back.f_globals is not None\n",
    "namedtuple-eval": "from collections import namedtuple\n"
    "def match(publication):\n"
    "    return namedtuple('P', 'x')(1).x == 1\n",
}

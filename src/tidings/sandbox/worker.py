"""A sandbox worker: `python -m tidings.sandbox.worker MEMORY_MIB CPU_MS PROFILE [FLAGS]`.

Reads one JSON request per line on stdin, `{"publication": "<JSON text>", "calls": [{"sid",
"kind", "hash", "source"?, "name"?, "params"}]}`, and answers one line per call as it
finishes, `{"sid", "match", "error", "ms"}`, then `{"done": true}`. Each call decodes its own
copy of the publication: what one call does to it, the next never sees. A code worker serves
one subscriber for its whole life (`sandbox/tenants.py`).

Limits: each call's CPU time twice, a profiling timer (a gentle `TimeLimit` the code may
catch) and the kernel's RLIMIT_CPU raised before each call to a second past the parent's
cap on the call's CPU, whole seconds up (`cpu.kernel_limit_s`; SIGXCPU, whose default
action ends the process: no `except` catches it); the address space, recursion depth, and
what the code can reach (restricted builtins, allow-listed imports). A library call's
budget is `--builtin-cpu-ms` (`functions.builtin_cpu_s`), its parent watching the CPU of
the worker and its children (the OCR's tesseract) alike. The parent's wall-clock watchdog
is the last resort.

PROFILE is `code` or `library` (the seccomp filter, `sandbox/boundary.py`). Flags:
`--seccomp` loads the filter after the library's preload and before the first request;
`--probe` stops there and prints `seccomp=N root=B` (the runner's check at start);
`--nice` lowers the worker's priority (quarantined subscribers); `--walls-off` runs code with
the full builtins and no audit hook, only for the tests that prove the OS boundary alone.
"""

from __future__ import annotations

import builtins
import importlib
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

import orjson

from tidings.sandbox.compile import ALLOWED_MODULES, LIBRARY
from tidings.sandbox.cpu import kernel_limit_s

SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "bytes", "chr", "dict", "divmod", "enumerate", "filter",
    "float", "frozenset", "hash", "int", "isinstance", "issubclass", "iter", "len", "list",
    "map", "max", "min", "next", "ord", "pow", "range", "repr", "reversed", "round", "set",
    "slice", "sorted", "str", "sum", "tuple", "zip", "ArithmeticError", "AssertionError",
    "Exception", "IndexError", "KeyError", "LookupError", "RuntimeError", "StopIteration",
    "TypeError", "ValueError", "ZeroDivisionError", "__build_class__",
)  # fmt: skip


BUILTIN_CPU_S = 10.0  # without --builtin-cpu-ms (functions.builtin_cpu_s's default)


class TimeLimit(BaseException):
    """Raised inside a call that used up its CPU time (BaseException: code cannot catch it
    with `except Exception`)."""


def public_view(name: str) -> ModuleType:
    """A copy of an allowed module with only its public, non-module attributes: the real
    module leads elsewhere (`json.codecs.open`, `re.enum.sys.modules`,
    `statistics.random._os`, `tidings.functions.importlib`)."""
    real = importlib.import_module(name)
    if name == "tidings.functions":
        from tidings.functions import BUILTINS, function

        names = {n: function(n) for n in BUILTINS} | {"call_builtin": real.call_builtin}
    else:
        names = {
            k: v
            for k, v in vars(real).items()
            if not k.startswith("_") and not isinstance(v, ModuleType) and k not in HIDDEN
        }
    view = ModuleType(name)
    vars(view).update(names)
    return view


VIEWS: dict[str, ModuleType] = {}
# getattr in disguise: Formatter().get_field("0." + name) and update_wrapper(assigned=[name])
# and eval in disguise: singledispatch().register evaluates string annotations
HIDDEN = frozenset({"Formatter", "update_wrapper", "wraps", "singledispatch",
                    "singledispatchmethod"})  # fmt: skip


LEAN = {"on": False}  # a code worker started without the library (`--lean`)


def guarded_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> Any:
    if level or name not in ALLOWED_MODULES:
        raise ImportError(f"import of {name!r} is not allowed")
    if name == LIBRARY and LEAN["on"]:  # the runner never sends code importing it here
        raise ImportError(f"{name!r} is not loaded in a lean worker")
    view = VIEWS.get(name) or VIEWS.setdefault(name, public_view(name))
    if fromlist or "." not in name:
        return view
    top = ModuleType("tidings")  # `import tidings.functions` binds `tidings`
    top.functions = view  # type: ignore[attr-defined]
    return top


def safe_builtins() -> dict[str, Any]:
    table = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    return {**table, "__import__": guarded_import, "True": True, "False": False, "None": None}


# Audit events refused while subscriber code runs: a third wall behind the compile check
# and the module views. `compile`/`exec` stop eval in disguise (typing's forward
# references via functools.singledispatch turned a built string into code).
BLOCKED_EVENTS = ("open", "os.", "subprocess.", "socket.", "shutil.", "ctypes.", "compile",
                  "exec", "sys._getframe", "sys.settrace", "sys.setprofile", "signal.",
                  "gc.", "sys.addaudithook", "urllib.", "marshal.", "pickle.")  # fmt: skip
GUARD: dict[str, Any] = {"on": False, "loading": None}


def audit(event: str, args: tuple[Any, ...]) -> None:
    if GUARD["loading"] is not None and event == "exec" and args[0] is GUARD["loading"]:
        GUARD["loading"] = None  # the subscription's own module, run once under the guard
        return
    if GUARD["on"] and event.startswith(BLOCKED_EVENTS):
        raise PermissionError(f"{event} is not allowed in a matching function")


class Worker:
    def __init__(
        self,
        cpu_s: float,
        walls: bool = True,
        code: bool = True,
        builtin_cpu_s: float = BUILTIN_CPU_S,
    ) -> None:
        self.cpu_s, self.builtin_cpu_s = cpu_s, builtin_cpu_s
        self.code = code  # False in the library's workers: they run only the library
        self.compiled: dict[str, Callable[[Any], Any]] = {}
        self.sources: dict[str, str] = {}  # by hash: sent once, kept for a load that failed
        self.builtins = safe_builtins() if walls else vars(builtins)

    def load(self, call: dict[str, Any]) -> Callable[[Any], Any]:
        """The subscription's `match`, its module run once: under the audit guard, as its
        calls are; a module that failed is run again at the next call (its source kept,
        as the runner sends it once)."""
        key = call["hash"]
        fn = self.compiled.get(key)
        if fn is None:
            source = self.sources.setdefault(key, call.get("source", ""))
            namespace: dict[str, Any] = {"__builtins__": self.builtins, "__name__": "subscription"}
            module = compile(source, "<subscription>", "exec")
            GUARD["loading"], GUARD["on"] = module, True
            try:
                exec(module, namespace)
            finally:
                GUARD["loading"], GUARD["on"] = None, False
            fn = self.compiled[key] = namespace["match"]
        return fn

    def run(self, call: dict[str, Any], publication: dict[str, Any]) -> dict[str, Any]:
        """The call's answer, with the CPU time it took (`ms`): what makes its subscriber
        suspect when slow; wall time would blame it for a machine busy with others."""
        start = time.process_time()
        answer = self._run(call, publication)
        answer["ms"] = round((time.process_time() - start) * 1000, 3)
        return answer

    def _run(self, call: dict[str, Any], publication: dict[str, Any]) -> dict[str, Any]:
        # the library's own functions (vision takes seconds) are not held to the code limit
        limit = self.builtin_cpu_s if call["kind"] == "builtin" else self.cpu_s
        kernel_cpu_limit(limit)
        signal.setitimer(signal.ITIMER_PROF, limit)
        try:
            if call["kind"] == "builtin":
                from tidings.functions import call_builtin

                result = call_builtin(call["name"], publication, call.get("params") or {})
            elif not self.code:
                raise PermissionError("the library's workers run no subscriber code")
            else:
                fn = self.load(call)
                GUARD["on"] = True
                try:
                    result = fn(publication)
                finally:
                    GUARD["on"] = False
            if not isinstance(result, bool):
                return {
                    "sid": call["sid"],
                    "match": False,
                    "error": f"match returned {type(result).__name__}, not a bool",
                }
            return {"sid": call["sid"], "match": result, "error": None}
        except TimeLimit:
            return {"sid": call["sid"], "match": False, "error": "cpu time limit exceeded"}
        except MemoryError:
            return {"sid": call["sid"], "match": False, "error": "memory limit exceeded"}
        except RecursionError:
            return {"sid": call["sid"], "match": False, "error": "recursion too deep"}
        except Exception as exc:  # the subscriber's bug, reported back to it
            return {
                "sid": call["sid"],
                "match": False,
                "error": f"{type(exc).__name__}: {exc}"[:300],
            }
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)


def kernel_cpu_limit(budget_s: float) -> None:
    """Let the kernel end this process once the call has used its budget, whole seconds up,
    a second past the parent's cap, so the parent, which watches every call and says why,
    comes first (`cpu.kernel_limit_s`). SIGXCPU's default action is out of the interpreter's
    reach; the hard limit stays open so the next call can raise the soft one again."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft = kernel_limit_s(used, budget_s)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))


def _on_timer(signum: int, frame: FrameType | None) -> None:
    raise TimeLimit


def limit_resources(memory_mib: int, seccomp: bool) -> None:
    """Cap the address space at what the worker already uses plus `memory_mib`; no core
    files; no child processes (the seccomp filter refuses them where it is loaded: there
    RLIMIT_NPROC, counted per uid and for threads too, would only break the library's
    threads)."""
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + memory_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not seccomp:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def lower_autogroup() -> None:
    """A worker is a session of its own (bubblewrap's --new-session), so with the kernel's
    autogroups its nice value weighs only inside that session: lower the session's too."""
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("19")
    except OSError:
        pass  # no autogroups here: the nice value alone weighs


def seccomp_status() -> int:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("Seccomp:"))
    return int(line.split()[1])


def load_library(flags: set[str]) -> None:
    """The library and its models, loaded before the limits apply (about a second of CPU:
    a lean worker, for code that does not import it, skips this)."""
    from tidings.functions import missing_extra, preload
    from tidings.functions.caps import set_caps

    caps = dict(f[2:].split("=", 1) for f in flags if f.startswith("--max-"))
    set_caps(int(caps.get("max-pixels", 40_000_000)), int(caps.get("max-text", 100_000)))
    preload()
    if missing_extra("vision") is None:
        from PIL import Image

        Image.init()  # every image plugin now: a lazy import inside a call would need `open`


def main() -> None:
    memory_mib, cpu_ms, profile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    flags = set(sys.argv[4:])
    if "--probe" in flags:
        from tidings.sandbox.boundary import install_seccomp

        install_seccomp("code")
        print(f"seccomp={seccomp_status()} root={os.getuid() == 0}", flush=True)
        return
    if "--nice" in flags:
        os.nice(19)  # before the preload: a replaced worker's start is CPU-heavy too
        lower_autogroup()
    LEAN["on"] = "--lean" in flags and profile == "code"
    if not LEAN["on"]:
        load_library(flags)
    signal.signal(signal.SIGPROF, _on_timer)
    sys.setrecursionlimit(300)
    for name in ALLOWED_MODULES - ({LIBRARY} if LEAN["on"] else set()):
        VIEWS[name] = public_view(name)  # imported now: importing later would open files
    if "--seccomp" in flags:
        from tidings.sandbox.boundary import install_seccomp

        install_seccomp("library" if profile == "library" else "code")
    limit_resources(memory_mib, "--seccomp" in flags)
    walls = "--walls-off" not in flags
    if walls:
        sys.addaudithook(audit)
    builtin_ms = next((f.split("=", 1)[1] for f in flags if f.startswith("--builtin-cpu-ms=")), "")
    builtin_cpu_s = int(builtin_ms) / 1000 if builtin_ms else BUILTIN_CPU_S
    worker = Worker(cpu_ms / 1000, walls, code=profile != "library", builtin_cpu_s=builtin_cpu_s)
    out = sys.stdout.buffer
    out.write(orjson.dumps({"ready": True, "seccomp": seccomp_status()}) + b"\n")
    out.flush()
    for line in sys.stdin.buffer:
        request = orjson.loads(line)
        text = request["publication"]
        for call in request["calls"]:
            publication = orjson.loads(text) if isinstance(text, str) else text
            out.write(orjson.dumps(worker.run(call, publication)) + b"\n")
            out.flush()
        out.write(b'{"done": true}\n')
        out.flush()


if __name__ == "__main__":
    main()

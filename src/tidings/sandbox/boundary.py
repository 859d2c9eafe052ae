"""The operating-system boundary around a function worker: bubblewrap's command line, and
the seccomp filter the worker installs on itself (docs/sandbox.md).

Existing, maintained tools rather than home-made ones: bubblewrap (namespaces, mounts,
no_new_privs, capabilities), util-linux's `setpriv` (a root broker's worker drops to a
dedicated uid/gid) and libseccomp (through pyseccomp). This module only assembles them.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import tidings
from tidings.config import FunctionSettings

Profile = Literal["code", "library"]
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
PROBE_TIMEOUT_S = 30.0
TMP_BYTES = 64 * 1024 * 1024  # OCR's temporary images fit many times over

# Refused (EPERM) in every worker: other processes' memory, sockets, the kernel's
# namespace, mount, key, module and tracing machinery. io_uring would bypass this filter.
REFUSED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "mount", "umount2", "mount_setattr", "move_mount", "open_tree", "fsopen", "fsmount",
    "fspick", "pivot_root", "chroot", "unshare", "setns", "keyctl", "add_key",
    "request_key", "bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "personality", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "open_by_handle_at", "name_to_handle_at",
    "quotactl", "swapon", "swapoff", "reboot", "syslog", "acct", "settimeofday",
    "clock_settime", "adjtimex", "iopl", "ioperm", "modify_ldt", "lookup_dcookie", "vhangup",
)  # fmt: skip
# Refused in code workers only: new programs and new processes. The library's workers run
# the `tesseract` program (OCR), and never run subscriber code.
NO_PROCESSES = ("execve", "execveat", "fork", "vfork")
CLONE_THREAD = 0x00010000


def tidings_root() -> Path:
    """The directory holding the `tidings` package this broker runs (a worker imports the
    same one)."""
    return Path(tidings.__file__).resolve().parent.parent


def worker_argv(settings: FunctionSettings, profile: Profile, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tidings.sandbox.worker",
        str(settings.memory_mib),
        str(settings.cpu_ms),
        profile,
        f"--max-pixels={settings.max_image_pixels}",
        f"--max-text={settings.max_text_bytes}",
        f"--builtin-cpu-ms={round(settings.builtin_cpu_s * 1000)}",
        *extra,
    ]


def worker_env() -> dict[str, str]:
    """All a worker gets of an environment: none of the broker's."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(tidings_root()),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMBA_NUM_THREADS": "1",
        "MPLCONFIGDIR": "/tmp",
    }


def readable_paths() -> list[Path]:
    """What Python needs, read-only: the interpreter's prefixes (venv and base) and the
    source of `tidings`. Nothing else of the host's directories is mounted."""
    wanted = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths = {Path(p).resolve() for p in wanted} | {tidings_root()}
    # a path inside another, or inside /usr (Debian's own Python), is already there
    usr = Path("/usr")
    return sorted(
        p
        for p in paths
        if p != usr and usr not in p.parents and not any(q != p and q in p.parents for q in paths)
    )


def _ancestors(paths: Iterable[Path]) -> list[str]:
    """Parents bubblewrap would create mode 0700 (unreadable to the worker's uid): made
    0755 first, explicitly."""
    out: set[str] = set()
    for path in paths:
        out.update(str(parent) for parent in path.parents if str(parent) != "/")
    return sorted(out, key=lambda p: (p.count("/"), p))


def mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in TOP_LEVEL:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # /tmp is memory: capped, or a write loop there would fill the host's RAM. It comes
    # before the binds: a Python or a checkout under /tmp (a CI clone) is then bound on top
    # of the empty /tmp instead of hidden under it.
    args += ["--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    binds = readable_paths()
    etc = [Path(f) for f in ETC_FILES if os.path.exists(f)]
    for parent in _ancestors([*binds, *etc]):
        if parent != "/tmp":
            args += ["--dir", parent]
    for path in [*binds, *etc]:
        args += ["--ro-bind", str(path), str(path)]
    return [*args, "--proc", "/proc", "--dev", "/dev"]


def bwrap_command(settings: FunctionSettings, argv: list[str]) -> list[str]:
    """`argv` inside new namespaces, a read-only view of only what Python needs, an empty
    /tmp, no environment but `worker_env()`, no capabilities, as an unprivileged uid."""
    uid, gid = str(settings.sandbox_uid), str(settings.sandbox_gid)
    common = ["--die-with-parent", "--new-session", "--clearenv", "--chdir", "/tmp"]
    env = [a for k, v in worker_env().items() for a in ("--setenv", k, v)]
    if os.geteuid() == 0:
        # no user namespace: one made by root maps the worker's uid to the host's 0. Keep
        # only what setpriv needs to drop to the dedicated uid/gid; it drops those too.
        isolate = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        isolate += ["--unshare-cgroup-try", "--cap-drop", "ALL"]
        isolate += [a for c in ("SETUID", "SETGID", "SETPCAP") for a in ("--cap-add", f"CAP_{c}")]
        drop = [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}"]
        drop += [f"--regid={gid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
        drop += ["--"]
    else:
        isolate = ["--unshare-all", "--uid", uid, "--gid", gid, "--cap-drop", "ALL"]
        drop = []
    return [settings.launcher, *isolate, *common, *mounts(), *env, "--", *drop, *argv]


def command(settings: FunctionSettings, profile: Profile, *, bounded: bool) -> list[str]:
    """The worker's command line: inside the boundary, or (unsafe, operator's choice) as a
    plain process that still gets no environment of the broker's."""
    argv = worker_argv(settings, profile)
    return bwrap_command(settings, [*argv, "--seccomp"]) if bounded else argv


def probe(settings: FunctionSettings) -> str | None:
    """Start a worker in the boundary once, in probe mode; None when it came up with its
    seccomp filter in place as an unprivileged user, else why not."""
    argv = bwrap_command(settings, [*worker_argv(settings, "code"), "--seccomp", "--probe"])
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=PROBE_TIMEOUT_S, env=worker_env(), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot start {settings.launcher!r}: {exc}"
    answer = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or answer != "seccomp=2 root=False":
        tail = (done.stderr.decode(errors="replace").strip().splitlines() or [""])[-1]
        return f"the sandbox did not come up (exit {done.returncode}: {answer or tail})"[:300]
    return None


def install_seccomp(profile: Profile) -> None:
    """Load the worker's filter (irreversible). Everything not listed stays allowed: an
    allow-list of CPython's, numpy's and OpenCV's system calls would break on upgrades."""
    import pyseccomp as seccomp

    refuse = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in REFUSED:
        flt.add_rule(refuse, name)
    if profile == "code":
        for name in NO_PROCESSES:
            flt.add_rule(refuse, name)
        # threads (CLONE_THREAD) yes, processes no; clone3 hides its flags in memory the
        # filter cannot read: ENOSYS makes glibc fall back to clone
        flt.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
        flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    flt.load()

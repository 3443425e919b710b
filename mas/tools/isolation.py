"""The OS isolation around the python tool: bubblewrap (``bwrap``) namespaces.

Stage: rollout (around the python tool a role calls).

The code runs in its own mount, PID, network, IPC and UTS namespaces. It sees, read-only,
only the interpreter, its standard library (with site-packages hidden) and the shared
libraries ``ldd`` says they load; a fresh ``/proc`` of its own PID namespace; a minimal
``/dev``; and a size-capped private tmpfs as ``/tmp`` and working directory. No host file of
the caller, no network (not even the host's loopback), no environment variable. Everything
the code starts lives in its PID namespace and ends with it: when the code exits, at its
deadline, and when mas dies.

Process counts: ``RLIMIT_NPROC`` is not enforced for root, and a user namespace started by
root maps the sandbox to root outside. So when mas runs as root, bwrap makes no user
namespace and the launcher inside gives up root for a uid of its own, chosen at random among
ids no account uses, before it sets the limits: the kernel then counts and caps that uid's
processes. When mas runs as an ordinary user, bwrap makes a user namespace and the kernel
counts the sandbox's processes in it, apart from the user's others.

``MAS_UNSAFE_PYTHON_TOOL=1`` (or ``--unsafe-python-tool``) opts out: a plain subprocess
with rlimits, for machines without bubblewrap. ``MAS_BWRAP`` names the bwrap binary.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

from mas.errors import UserError

UNSAFE_ENV = "MAS_UNSAFE_PYTHON_TOOL"
BWRAP_ENV = "MAS_BWRAP"
SCRATCH = "/tmp/mas-sandbox-scratch"
"""The code's working directory, inside the sandbox's private /tmp."""
OPT_OUT = f"or run it without isolation: --unsafe-python-tool or {UNSAFE_ENV}=1"

# PID 1 of the sandbox (bwrap --as-pid-1): when it exits, the kernel kills every process left
# in the namespace, and no process in it can signal it. It forks the code's process, which
# leaves root if bwrap ran as root (see above), sets the limits and becomes the code's
# interpreter. PID 1 itself becomes another unprivileged uid, reaps orphans, and exits with the
# code's status as soon as the code ends, or at once when the lifeline (a pipe whose other end
# only mas holds) closes because mas is gone. The lifeline, not bwrap's --die-with-parent, ties
# the sandbox to mas: bwrap sets that only after it has forked its child, which then waits for
# a word from bwrap; mas dying in between killed bwrap and left the child waiting for ever.
# Every other descriptor bwrap passed in is closed first (mas's end of --info-fd among them).
_LAUNCH = """\
import os, resource, select, signal, sys
uid, lifeline, *limits = map(int, sys.argv[1:-1])
os.closerange(3, max(lifeline, 3)); os.closerange(max(lifeline + 1, 3), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
wake, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
child = os.fork()
if child == 0:
    if lifeline >= 0:
        os.close(lifeline)
    if os.getuid() == 0:
        os.setgroups([]); os.setgid(uid); os.setuid(uid)
    for name, value in zip(("CPU", "AS", "FSIZE", "NOFILE", "NPROC"), limits):
        resource.setrlimit(getattr(resource, "RLIMIT_" + name), (value, value))
    os.execv(sys.executable, [sys.executable, "-I", "-c", sys.argv[-1]])
if os.getuid() == 0:
    os.setgroups([]); os.setgid(uid + 1); os.setuid(uid + 1)
while True:
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == child:
        code = os.waitstatus_to_exitcode(status)
        os._exit(128 - code if code < 0 else code)
    if pid == 0:
        if lifeline in select.select([wake] + [lifeline] * (lifeline >= 0), [], [])[0]:
            os._exit(137)
        os.read(wake, 4096)
"""


def unsafe() -> bool:
    """Has the user opted out of isolation? Only a plain yes counts: ``false`` must not mean
    the opposite, and a value that is neither is refused."""
    value = os.environ.get(UNSAFE_ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise UserError(f"{UNSAFE_ENV}={value!r}: expected 1 (run the python tool without isolation) or 0")


_warned = False


def warn_unsafe() -> None:
    """Say once per process, on stderr, that model-written code runs unconfined."""
    global _warned
    if not _warned:
        _warned = True
        print(
            f"mas: the python tool runs WITHOUT isolation ({UNSAFE_ENV}=1): model-written code can read, "
            "write and reach whatever you can",
            file=sys.stderr,
        )


def require() -> str | None:
    """The bwrap binary to run the python tool with, or None when the user opted out.
    Raises a one-line ``UserError`` naming the fix when isolation does not work here."""
    if unsafe():
        warn_unsafe()
        return None
    bwrap = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    if not bwrap or not os.access(bwrap, os.X_OK):
        found = f"no bubblewrap at {bwrap}" if bwrap else "bubblewrap (bwrap) is not installed"
        raise UserError(f"the python tool cannot be isolated here ({found}): apt-get install bubblewrap, {OPT_OUT}")
    problem = _problem(bwrap)
    if problem:
        raise UserError(
            f"the python tool cannot be isolated here ({problem}): let bwrap create namespaces "
            f"(unprivileged user namespaces must be allowed when mas is not root), {OPT_OUT}"
        )
    return bwrap


@cache
def _problem(bwrap: str) -> str | None:
    """Why isolation fails with this bwrap, or None: a trial run of the real command."""
    try:
        argv = command(bwrap, "pass", cpu=5, memory_mb=256, processes=8, scratch_mb=1, info_fd=None, lifeline=None)
        done = subprocess.run(argv, env={}, stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired, _NoLdd) as exc:
        return f"{bwrap}: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{bwrap} failed: {said[-1] if said else f'exit code {done.returncode}'}"
    return None


def command(
    bwrap: str,
    code: str,
    *,
    cpu: int,
    memory_mb: int,
    processes: int,
    scratch_mb: int,
    info_fd: int | None,
    lifeline: int | None,
) -> list[str]:
    """The bwrap command line that runs ``code`` under the limits given.

    ``info_fd``: bwrap writes the host PID of the sandbox's PID 1 (JSON) there; killing that
    process makes the kernel kill everything in the sandbox's PID namespace. ``lifeline``:
    the read end of a pipe whose write end only mas holds; the sandbox ends when it closes."""
    exe, binds, hidden = _view()
    if os.geteuid() == 0:
        spaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        spaces += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # for the launcher's setuid, then gone
    else:
        spaces = ["--unshare-all", "--unshare-user", "--disable-userns"]
    argv = [bwrap, *spaces, "--as-pid-1", "--new-session", "--clearenv", "--hostname", "sandbox"]
    for folder in sorted({p for _, dest in binds for p in map(str, Path(dest).parents)} - {"/"}):
        argv += ["--perms", "0755", "--dir", folder]  # bwrap would make them 0700: closed to the uid inside
    for source, dest in binds:
        argv += ["--ro-bind", source, dest]
    for folder in hidden:
        argv += ["--perms", "0555", "--tmpfs", folder]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(8 << 20), "--tmpfs", "/dev/shm"]
    argv += ["--perms", "1777", "--size", str(scratch_mb << 20), "--tmpfs", "/tmp"]
    argv += ["--perms", "0777", "--dir", SCRATCH, "--chdir", SCRATCH]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    limits = [cpu, memory_mb << 20, 10 << 20, 64, processes]  # CPU s, address space, file size, open files, tasks
    uid = 2_000_000_000 + secrets.randbelow(100_000_000)  # no account's; unique to this run in practice
    lifeline_fd = -1 if lifeline is None else lifeline
    return [*argv, exe, "-I", "-S", "-c", _LAUNCH, str(uid), str(lifeline_fd), *map(str, limits), code]


class _NoLdd(Exception):
    pass


@cache
def _view() -> tuple[str, list[tuple[str, str]], list[str]]:
    """What the sandbox sees of the host: the interpreter (never a venv's link to it), the
    standard library, the shared libraries they load, and the site-packages to hide."""
    exe = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    stdlib = {os.path.realpath(base[k]) for k in ("stdlib", "platstdlib")}
    dynload = [p for d in stdlib for p in Path(d, "lib-dynload").glob("*.so")]
    binds = [(exe, exe), *((d, d) for d in sorted(stdlib))]
    for lib in _shared_libraries([exe, *map(str, dynload)]):
        if not any(lib.startswith(d + "/") for d in stdlib):
            binds.append((os.path.realpath(lib), lib))  # at the path the loader asks for
    hidden = sorted(
        {p for k in ("purelib", "platlib") if any((p := os.path.realpath(base[k])).startswith(d + "/") for d in stdlib)}
    )
    return exe, binds, [h for h in hidden if os.path.isdir(h)]


def _shared_libraries(files: list[str]) -> list[str]:
    """The libraries ``ldd`` lists for ``files``, each once, as the loader names them."""
    ldd = shutil.which("ldd")
    if not ldd:
        raise _NoLdd("ldd not found: it lists the shared libraries the interpreter needs")
    listed = subprocess.run([ldd, *files], capture_output=True, text=True, env={"LC_ALL": "C"}).stdout
    return sorted(set(re.findall(r"(/\S+) \(0x", listed)))

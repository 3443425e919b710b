"""A memory and process cap on the python tool's whole process tree: a leaf cgroup per run.

Stage: rollout (around the python tool a role calls).

Per-process rlimits (``RLIMIT_AS``, ``RLIMIT_NPROC``) let a program hold the memory of one
process times the processes it may start (512 MB x 16); a cgroup caps their sum. The sandbox
is moved into a fresh leaf before bwrap starts (``prefix`` runs it under ``sh``, which writes
its own PID into the leaf and then execs bwrap, so every process of the sandbox starts
inside), with ``memory.max`` and ``pids.max`` set; the kernel's OOM killer ends a process of
the tree when the tree passes the cap. After the run whatever is left is killed and the leaf
removed.

Both layouts are handled: cgroup v2 (the leaf goes under mas's own cgroup, which must have
``memory`` and ``pids`` in ``cgroup.subtree_control`` or let mas enable them) and the v1
``memory`` and ``pids`` hierarchies. Where neither is writable (no root, no delegation, a
container without them), ``open_cap`` says why and the per-process limits are all there is.
``MAS_SANDBOX_CGROUP=0`` turns the cap off.

>>> cap, why = open_cap(memory_mb=1024, processes=20)  # doctest: +SKIP
>>> argv = [*cap.prefix(), "bwrap", ...]; ...; cap.close()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ENV = "MAS_SANDBOX_CGROUP"
MOUNTINFO = Path("/proc/self/mountinfo")
OWN = Path("/proc/self/cgroup")
PREFIX = "mas-sandbox-"
"""Leaves are named ``mas-sandbox-<mas's pid>-<random>``."""
# Writes its own PID into each cgroup.procs named before "--", then becomes the command.
_ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass
class Cap:
    """One run's leaf cgroup(s): one directory for v2, the memory and pids ones for v1."""

    version: int
    dirs: list[Path]
    memory_mb: int

    def prefix(self) -> list[str]:
        """The command words that start what follows them inside the leaf."""
        return ["/bin/sh", "-c", _ENTER, "sh", *(str(d / "cgroup.procs") for d in self.dirs), "--"]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the tree for passing the memory cap."""
        for name in ("memory.events", "memory.oom_control"):  # v2, v1
            with contextlib.suppress(OSError, ValueError):
                counts = dict(line.split()[:2] for line in (self.dirs[0] / name).read_text().splitlines())
                if "oom_kill" in counts:
                    return int(counts["oom_kill"]) > 0
        with contextlib.suppress(OSError, ValueError):  # older v1 kernels: the cap was reached
            return int((self.dirs[0] / "memory.failcnt").read_text()) > 0
        return False

    def close(self) -> None:
        """Kill what is left in the leaf and remove it."""
        for folder in reversed(self.dirs):
            for _ in range(50):
                if not folder.exists():
                    break
                _kill_all(folder)
                with contextlib.suppress(OSError):
                    folder.rmdir()
                    break
                time.sleep(0.02)


def open_cap(*, memory_mb: int, processes: int) -> tuple[Cap | None, str]:
    """A fresh leaf cgroup holding at most ``memory_mb`` and ``processes`` tasks, or None and
    why there is none here."""
    if os.environ.get(ENV, "") in ("0", "off", "no"):
        return None, f"{ENV}=0"
    try:
        mounts = _mounts()
        own = _own()
    except OSError as exc:
        return None, f"cgroups unreadable: {exc}"
    errors = []
    for make in (_v2, _v1):
        try:
            cap = make(mounts, own, memory_mb, processes)
        except OSError as exc:
            errors.append(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
            continue
        except LookupError as exc:
            errors.append(str(exc))
            continue
        return cap, ""
    return None, "; ".join(errors)


def _v2(mounts: dict[str, tuple[Path, str]], own: dict[str, str], memory_mb: int, processes: int) -> Cap:
    base = _folder(mounts, own, "cgroup2", "")
    if not {"memory", "pids"} <= set((base / "cgroup.controllers").read_text().split()):
        raise LookupError("cgroup v2 without the memory and pids controllers")
    control = base / "cgroup.subtree_control"
    if not {"memory", "pids"} <= set(control.read_text().split()):
        control.write_text("+memory +pids")  # refused (EBUSY) where mas's own cgroup holds processes
    leaf = _make(base)
    try:
        (leaf / "memory.max").write_text(str(memory_mb << 20))
        with contextlib.suppress(OSError):  # no swap for the tree; absent without swap accounting
            (leaf / "memory.swap.max").write_text("0")
        (leaf / "pids.max").write_text(str(processes))
    except OSError:
        Cap(2, [leaf], memory_mb).close()
        raise
    return Cap(2, [leaf], memory_mb)


def _v1(mounts: dict[str, tuple[Path, str]], own: dict[str, str], memory_mb: int, processes: int) -> Cap:
    bases = [_folder(mounts, own, "memory", "memory")]
    with contextlib.suppress(LookupError):  # without it, RLIMIT_NPROC still counts processes
        bases.append(_folder(mounts, own, "pids", "pids"))
    dirs: list[Path] = []
    try:
        for base in bases:
            dirs.append(_make(base))
        memory = dirs[0]
        (memory / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
        with contextlib.suppress(OSError):  # memory plus swap: absent without swap accounting
            (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_mb << 20))
        if len(dirs) > 1:
            (dirs[1] / "pids.max").write_text(str(processes))
    except OSError:
        Cap(1, dirs, memory_mb).close()
        raise
    return Cap(1, dirs, memory_mb)


def _make(base: Path) -> Path:
    _sweep(base)
    leaf = base / f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    leaf.mkdir()
    return leaf


def _sweep(base: Path) -> None:
    """Remove the empty leaves of mas processes that are gone: one killed outright (SIGKILL)
    never reaches ``close``. A leaf still holding a process stays (rmdir refuses it)."""
    for leaf in base.glob(f"{PREFIX}*"):
        pid = leaf.name[len(PREFIX) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                leaf.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _mounts() -> dict[str, tuple[Path, str]]:
    """Each hierarchy's mount point and the cgroup path at it ("/" unless a container sees
    only its subtree): "cgroup2", and each v1 controller by name."""
    found: dict[str, tuple[Path, str]] = {}
    for line in MOUNTINFO.read_text().splitlines():
        fields = line.split()
        kind = fields[fields.index("-") + 1]
        names = ["cgroup2"] if kind == "cgroup2" else fields[-1].split(",") if kind == "cgroup" else []
        for name in names:
            found.setdefault(name, (Path(fields[4]), fields[3]))
    return found


def _folder(mounts: dict[str, tuple[Path, str]], own: dict[str, str], name: str, key: str) -> Path:
    """The directory of mas's own cgroup in hierarchy ``name``."""
    if name not in mounts or key not in own:
        raise LookupError(f"no cgroup {'v2' if name == 'cgroup2' else 'v1 ' + name} hierarchy")
    point, root = mounts[name]
    path = own[key]
    if not (path + "/").startswith(root.rstrip("/") + "/"):
        raise LookupError(f"mas's cgroup {path} is outside the mounted {root}")
    return point / path[len(root.rstrip("/")) :].lstrip("/")


def _own() -> dict[str, str]:
    """mas's own cgroup path per controller ("" for v2), from /proc/self/cgroup."""
    found = {}
    for line in OWN.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _kill_all(folder: Path) -> None:
    if (kill := folder / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            kill.write_text("1")
            return
    with contextlib.suppress(OSError):
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)

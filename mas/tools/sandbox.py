"""Running model-written Python: isolated by the OS, limited, never in the mas process.

Stage: rollout (the python tool a role calls).

The code runs under bubblewrap (``mas.tools.isolation``): it sees only the interpreter and
its standard library, has no network, no environment, a private scratch directory, and its
own PID namespace, so one kill ends every process it started: at the deadline, and when
the code exits. The kernel limits CPU seconds, memory per process, file size, open files
and the number of processes; and, in a cgroup of its own where one can be made here
(``mas.tools.cgroups``), the memory and task count of the whole process tree. Where none can,
mas says so once on stderr and the per-process limits are all there is.

Its output is read as it comes and at most a few times what the tool returns: code that
prints without end is stopped, and costs mas a fixed small buffer. If the rollout is
cancelled while the code runs, the sandbox is killed at once.

Opted out of isolation (``MAS_UNSAFE_PYTHON_TOOL=1``), the code runs as a plain subprocess
with an empty environment, a scratch directory and the same rlimits but the process count.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import sys
import tempfile

from pydantic import Field

from mas.tools import cgroups, isolation
from mas.types.base import Frozen


class Limits(Frozen):
    cpu_seconds: int = Field(5, ge=1)
    memory_mb: int = Field(512, ge=64)
    """Address space per process."""
    wall_seconds: float = Field(10.0, gt=0)
    output_chars: int = Field(2000, ge=100)
    tree_memory_mb: int = Field(1024, ge=64)
    """Memory of all the code's processes together, the private /tmp included (isolated runs
    where a cgroup can be made here)."""
    processes: int = Field(16, ge=2)
    """Processes and threads at once, the code's own included, and as an ordinary user the
    sandbox's PID 1 too (isolated runs only)."""
    scratch_mb: int = Field(64, ge=1)
    """Size of the private /tmp that holds the working directory (isolated runs only)."""


async def run_python(code: str, limits: Limits = Limits()) -> str:
    """Run ``code`` and return what it printed (stdout, then stderr), cut to a size a
    prompt can hold. Never raises for anything the code does; raises ``UserError`` when the
    code cannot be isolated here and the user has not opted out."""
    bwrap = isolation.require()
    if bwrap is None:
        with tempfile.TemporaryDirectory(prefix="mas-sandbox-") as scratch:
            return await _unsafe(code, limits, scratch)
    return await _isolated(code, limits, bwrap)


async def _isolated(code: str, limits: Limits, bwrap: str) -> str:
    # bwrap, its PID 1 and a spare beside the code's own processes
    cap, why = cgroups.open_cap(memory_mb=limits.tree_memory_mb, processes=limits.processes + 4)
    if cap is None:
        warn_no_tree_cap(why, limits)
    try:
        said = await _bwrapped(code, limits, bwrap, cap.prefix() if cap else [])
        if cap is not None and cap.oom_killed():
            said += f"\nstopped: the code's processes together passed the {limits.tree_memory_mb} MB memory cap"
        return said
    finally:
        if cap is not None:
            cap.close()


_warned_tree = False


def warn_no_tree_cap(why: str, limits: Limits) -> None:
    """Say once per process, on stderr, that the python tool's memory is capped per process only."""
    global _warned_tree
    if not _warned_tree:
        _warned_tree = True
        print(
            f"mas: no cgroup for the python tool here ({why}): its memory is capped per process only "
            f"({limits.memory_mb} MB x {limits.processes} processes), not for the whole process tree",
            file=sys.stderr,
        )


async def _bwrapped(code: str, limits: Limits, bwrap: str, prefix: list[str]) -> str:
    info, info_w = os.pipe()
    lifeline, lifeline_w = os.pipe()  # mas keeps the write end: when mas dies, the sandbox does
    try:
        argv = isolation.command(
            bwrap, code, cpu=limits.cpu_seconds, memory_mb=limits.memory_mb, processes=limits.processes,
            scratch_mb=limits.scratch_mb, info_fd=info_w, lifeline=lifeline,
        )  # fmt: skip
        # bwrap holds the read end of --info-fd too: were mas gone, its write would fail, and
        # bwrap die between forking its child and letting it go, leaving the child waiting
        child = await _spawn([*prefix, *argv], pass_fds=(info, info_w, lifeline))
    except BaseException:
        os.close(info)
        os.close(lifeline_w)
        raise
    finally:
        os.close(info_w)
        os.close(lifeline)
    init: int | None = None  # a pidfd for the sandbox's PID 1, once bwrap has said which it is
    lifeline_open = True

    def kill() -> None:
        nonlocal lifeline_open
        if init is not None:  # PID 1 of a namespace dies: the kernel kills every process in it
            with contextlib.suppress(ProcessLookupError):  # it may have ended on its own meanwhile
                signal.pidfd_send_signal(init, signal.SIGKILL)
        elif lifeline_open:  # still setting up: killing bwrap now would strand its child;
            lifeline_open = False  # its PID 1 ends as soon as it starts, and bwrap with it
            os.close(lifeline_w)

    try:
        init = _pidfd(await asyncio.to_thread(_read_pid, info), parent=child.pid)
        # bwrap exits with the code's status, or 128 + the signal that killed it
        return await _supervise(child, limits, kill=kill, signalled=lambda rc: rc - 128 if rc > 128 else 0)
    finally:
        await _stop(child, kill)  # bwrap reaps its PID 1, so exits, only once the namespace is empty
        if lifeline_open:
            os.close(lifeline_w)
        if init is not None:
            os.close(init)


async def _unsafe(code: str, limits: Limits, scratch: str) -> str:
    child = await _spawn([sys.executable, "-I", "-c", code], cwd=scratch, preexec_fn=lambda: _limit(limits))

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            child.kill()

    try:
        return await _supervise(child, limits, kill=kill, signalled=lambda rc: -rc if rc < 0 else 0)
    finally:
        await _stop(child, kill)


async def _stop(child: asyncio.subprocess.Process, kill) -> None:
    """Timed out, cut or cancelled: kill, then reap. What is left in the pipes is read and
    dropped, or a pipe paused on a full buffer would never see its end, nor the child its reaping."""
    if child.returncode is not None:
        return
    kill()
    try:
        await asyncio.wait_for(asyncio.gather(_drain(child.stdout), _drain(child.stderr), child.wait()), 2)
    except TimeoutError:  # only opted out of isolation: an orphan may hold the pipes open
        with contextlib.suppress(ProcessLookupError):
            child.kill()


async def _spawn(argv: list[str], **options) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv, env={}, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, **options,
    )  # fmt: skip


async def _supervise(child, limits: Limits, *, kill, signalled) -> str:
    """Read the output up to a cap, wait for the exit; kill at the deadline or at the cap."""
    cap = 4 * limits.output_chars  # bytes: enough for the characters returned, in any UTF-8
    out, err = bytearray(), bytearray()
    stopped = ""
    try:
        async with asyncio.timeout(limits.wall_seconds):
            full = await asyncio.gather(_read(child.stdout, out, cap, kill), _read(child.stderr, err, cap, kill))
            await child.wait()
        if any(full):
            stopped = f"stopped: the code printed more than the {limits.output_chars} characters the tool returns"
    except TimeoutError:
        stopped = f"stopped: the code ran past {limits.wall_seconds:g} s"
    text = (bytes(out) + bytes(err)).decode(errors="replace").strip()[: limits.output_chars]
    if not stopped and (number := signalled(child.returncode)):
        stopped = f"stopped by signal {number} (CPU or memory limit)"
    return "\n".join(filter(None, [text, stopped])) or "(no output)"


async def _read(stream: asyncio.StreamReader, into: bytearray, cap: int, kill) -> bool:
    """Append ``stream`` to ``into`` until it ends or passes ``cap`` bytes; at the cap, kill
    the code (it would block on a full pipe) and say so. Never holds more than ``cap``."""
    while chunk := await stream.read(cap + 1 - len(into)):
        into += chunk
        if len(into) > cap:
            kill()
            await _drain(stream)
            return True
    return False


async def _drain(stream: asyncio.StreamReader) -> None:
    """Read and drop the rest of ``stream``, up to its end, which closes the pipe."""
    while await stream.read(1 << 16):
        pass


def _read_pid(fd: int) -> int | None:
    """The host PID of the sandbox's PID 1, from bwrap's ``--info-fd`` JSON (closes ``fd``)."""
    with os.fdopen(fd, "rb") as info:
        text = info.read()
    try:
        return int(json.loads(text)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None  # bwrap failed before it started the sandbox: its error is on stderr


def _pidfd(pid: int | None, *, parent: int) -> int | None:
    """A pidfd for ``pid`` if it is still ``parent``'s child: a PID is never signalled after
    it may have been reused by another process."""
    if pid is None:
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:  # read after the pidfd pins the process
            ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        ppid = None
    if ppid != parent:
        os.close(fd)
        return None
    return fd


def _limit(limits: Limits) -> None:
    cap = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_FSIZE, (10 * 1024 * 1024, 10 * 1024 * 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

"""Running model-written Python: a subprocess with limits, never in the mas process.

The child gets an empty environment (no API keys), Python's isolated mode, a scratch
directory that is deleted afterwards, and kernel limits on CPU seconds, memory, file size
and open files; a wall-clock timeout backs up the CPU limit (a sleeping child uses none).
If the rollout is cancelled while the code runs, the child is killed at once: a runaway
tool call cannot hold a rollout past its deadline.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile

from pydantic import Field

from mas.types import Frozen


class Limits(Frozen):
    cpu_seconds: int = Field(5, ge=1)
    memory_mb: int = Field(512, ge=64)
    wall_seconds: float = Field(10.0, gt=0)
    output_chars: int = Field(2000, ge=100)


async def run_python(code: str, limits: Limits = Limits()) -> str:
    """Run ``code`` and return what it printed (stdout, then stderr), cut to a size a
    prompt can hold. Never raises for anything the code does."""
    with tempfile.TemporaryDirectory(prefix="mas-sandbox-") as scratch:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-c", code,
            cwd=scratch, env={}, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            preexec_fn=lambda: _limit(limits),
        )  # fmt: skip
        try:
            out, err = await asyncio.wait_for(child.communicate(), limits.wall_seconds)
        except TimeoutError:
            return f"stopped: the code ran past {limits.wall_seconds:g} s"
        finally:
            if child.returncode is None:  # timed out or cancelled: kill, then reap
                child.kill()
                await child.wait()
    text = (out + err).decode(errors="replace").strip()
    if child.returncode and child.returncode < 0:
        text += f"\nstopped by signal {-child.returncode} (CPU or memory limit)"
    return text[: limits.output_chars] or "(no output)"


def _limit(limits: Limits) -> None:
    cap = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_FSIZE, (10 * 1024 * 1024, 10 * 1024 * 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

"""Ctrl-C and SIGTERM stop a command cleanly: the commands run their work through ``run``,
and ``mas.cli.main`` turns the ``Interrupted`` it raises into one line saying how to resume.

Stage: none: the command line.

A module of its own so that ``mas.cli.main`` catches the very class the commands raise
without importing the commands (``python -m mas.cli.main`` would otherwise hold two copies).
"""

from __future__ import annotations

import signal


class Interrupted(Exception):
    """Ctrl-C or SIGTERM stopped a command; ``resume`` says how to go on."""

    def __init__(self, signum: int, resume: str):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.resume = signum, resume


NOTHING_TO_RESUME = "nothing to resume: run the command again"


def run(coroutine, *, resume: str = NOTHING_TO_RESUME):
    """Run the coroutine. Ctrl-C and SIGTERM cancel it (so the embedded server is stopped and
    no journal line is left half written) and raise ``Interrupted``."""
    import asyncio
    import logging

    # autogen logs every failed agent turn with a traceback; mas counts them in its reports.
    logging.getLogger("autogen_core").setLevel(logging.CRITICAL)
    got: list[int] = []

    async def interruptible():
        loop, task = asyncio.get_running_loop(), asyncio.current_task()

        def stop(signum: int) -> None:
            got.append(signum)
            task.cancel()

        def quiet(loop, context) -> None:  # tasks torn down by the interruption complain; mute them
            if not got and not _torn_down_runtime(context):
                loop.default_exception_handler(context)

        loop.set_exception_handler(quiet)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop, signum)
        try:
            return await coroutine
        except asyncio.CancelledError:
            if got:
                raise Interrupted(got[0], resume) from None
            raise

    try:
        return asyncio.run(interruptible())
    except KeyboardInterrupt:  # between the signal handlers' set-up and tear-down
        raise Interrupted(got[0] if got else signal.SIGINT, resume) from None


def run_in(run_dir, coroutine):
    """``run`` for the work of the run in ``run_dir``: an interruption says how to resume it, and
    a new run refused before it journaled anything leaves no folder (``runs.undone_if_refused``)."""
    from mas import runs

    with runs.undone_if_refused(run_dir):
        return run(coroutine, resume=f"run the same command with --run-dir {run_dir} to resume")


def _torn_down_runtime(context: dict) -> bool:
    """autogen-core 0.7.5's runtime, stopped under a publish that a rollout's timeout
    cancelled, calls ``task_done`` on its reset queue once too often, in a task no one awaits;
    asyncio reports it when the loop closes, with a traceback, though nothing was lost (the
    rollout is already counted as timed out)."""
    exc, task = context.get("exception"), context.get("future") or context.get("task")
    return (
        isinstance(exc, ValueError)
        and str(exc) == "task_done() called too many times"
        and "SingleThreadedAgentRuntime" in repr(task)
    )


def terminated(signum, frame):
    """The SIGTERM handler outside the event loop (``run`` handles it within)."""
    raise Interrupted(signum, NOTHING_TO_RESUME)

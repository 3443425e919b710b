"""The ``mas`` command: a thin layer over the Python API.

Stage: none: the command line.

Bad input (a file, a line, a field, an option) ends with a one-line message on stderr and exit
code 2, before anything is written. Ctrl-C and SIGTERM stop a command cleanly: one line saying
how to resume, exit code 130 or 143, no traceback. Every message is redacted and made safe
for a terminal.

The commands live in their own modules, and a command's module is imported only when that
command runs (or its help is asked for): ``mas --help`` lists them from ``COMMANDS`` below and
imports none, so it never loads pydantic and the settings models; ``mas library show``
imports ``mas.cli.library`` alone, never the options of ``train``. ``tests/test_cli_help.py``
checks that the listing matches each command's own help.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import import_module
from typing import NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from mas.cli.interrupt import NOTHING_TO_RESUME, Interrupted, terminated
from mas.errors import Stopped, UserError


class Listed(NamedTuple):
    module: str
    """The module whose ``app`` (a ``typer.Typer``) declares the command."""
    help: str
    """The first paragraph of the command's help, as ``mas --help`` lists it."""


COMMANDS = {
    "train": Listed(
        "mas.cli.commands", "Train the role libraries of SCENARIO (or of an autogen --team) with Training-Free GRPO."
    ),
    "eval": Listed(
        "mas.cli.studies", "Mean@k and Pass@k without and with libraries, on the same held-out tasks and seeds."
    ),
    "transfer": Listed(
        "mas.cli.studies",
        "Role x role matrix: the change in Mean@k when role B's prompt gets role A's lessons (or, with "
        "--from-trials, the change in success rate the randomized transfer trials measured).",
    ),
    "ablate": Listed("mas.cli.studies", "The paper's ablations and ours, trained and evaluated alike, in one table."),
    "report": Listed(
        "mas.cli.commands",
        "Markdown and PNG plots of training runs and studies: reward, library size, tool calls, promotions, "
        "what was refused and what failed.",
    ),
    "promote": Listed(
        "mas.cli.promote",
        "A promotion pass on the randomized evidence: promote lessons shown to help several roles, demote "
        "global lessons that no longer do, prune lessons that no longer help their role.",
    ),
    "library": Listed(
        "mas.cli.library",
        "Show, compare, export, import, review and recover libraries; add or remove a lesson, or roll back a "
        "library, by hand.",
    ),
    "graph": Listed("mas.cli.library", "The usage graph of a library file."),
}
"""Every command of ``mas``, in the order ``mas --help`` lists them."""


@cache
def _declared(module: str) -> TyperGroup:
    """The commands ``module`` declares, as click commands (built once per module)."""
    return typer.main.get_group(import_module(module).app)


class _Commands(Mapping):
    """The commands by name, each one's module imported when the command is first looked up."""

    def __getitem__(self, name: str) -> TyperCommand | TyperGroup:
        return _declared(COMMANDS[name].module).commands[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class _Mas(TyperGroup):
    """The ``mas`` group: its commands are looked up in ``COMMANDS`` (click's own lookup, and
    the "Did you mean" of a typo, work on them unchanged), and its help lists them from there."""

    def __init__(self, **attrs) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(COMMANDS)  # the names alone: TyperGroup's would look every command up

    def format_commands(self, ctx: typer.Context, formatter) -> None:
        """The listing of ``TyperGroup.format_commands``, with each short help cut from
        ``COMMANDS`` the way click cuts it from a command's own help."""
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [(name, TyperCommand(name, help=c.help).get_short_help_str(limit)) for name, c in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    cls=_Mas, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
    help="Train per-role lesson libraries for a team of agents.",
)  # fmt: skip


def _version(value: bool) -> None:
    from importlib.metadata import version

    if value:
        print(f"mas {version('mas')}")
        raise typer.Exit()


@app.callback()
def _main(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Train per-role lesson libraries for a team of agents."""


def _say(message: str) -> None:
    from rich.console import Console

    from mas.cli.library import shown
    from mas.redact import redact

    Console(stderr=True, soft_wrap=True).print(shown(redact(message)), markup=False, highlight=False)


def main() -> None:
    before = signal.signal(signal.SIGTERM, terminated)  # outside the event loop; interrupt.run handles it within
    try:
        _run()
    finally:
        signal.signal(signal.SIGTERM, before)


def _run() -> None:
    try:
        code = app(standalone_mode=False)
    except UserError as exc:
        _say(f"error: {exc}")
        sys.exit(2)
    except Stopped as exc:
        _say(f"error: {exc}")
        sys.exit(1)
    except Interrupted as exc:
        _say(f"interrupted ({exc}); {exc.resume}")
        sys.exit(128 + exc.signum)
    except KeyboardInterrupt:
        _say(f"interrupted (SIGINT); {NOTHING_TO_RESUME}")
        sys.exit(130)
    except TyperException as exc:  # a bad option or argument: the message names it; exit 2
        _say(f"error: {exc.format_message()}")
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file mas could not read or write that no check caught first
        where = f"{exc.filename}: " if exc.filename else ""
        _say(f"error: {where}{exc.strerror or exc}")
        sys.exit(2)
    # Outside standalone mode typer returns what ends a command instead of raising it: an exit
    # code, 130 for a Ctrl-C it caught itself (one outside ``interrupt.run``'s event loop).
    if code == 130:
        _say(f"interrupted (SIGINT); {NOTHING_TO_RESUME}")
    if isinstance(code, int) and not isinstance(code, bool):
        sys.exit(code)


if __name__ == "__main__":
    main()

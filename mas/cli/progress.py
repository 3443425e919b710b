"""Progress bars on stderr while a command runs.

Stage: none: the command line.

Shown on a terminal only: never when stderr is a file or a pipe, under CI (``CI`` set), or
with ``--json``. Messages printed through ``Bars.say`` appear above the bars, or as plain
lines when there are none. An error removes the bars, so that its line is all there is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from mas.errors import UserError
from mas.models.wrappers import Counted


def wanted(console: Console, *, as_json: bool = False) -> bool:
    """Whether bars belong on ``console``: a terminal, not CI, not ``--json``."""
    return console.is_terminal and not as_json and not os.environ.get("CI")


class InFlight(ProgressColumn):
    """The model calls in flight through a ``Counted`` client (or a ``RayExecutor``'s workers)."""

    def __init__(self, client: Counted):
        super().__init__()
        self.client = client

    def render(self, task: Task) -> Text:
        n = self.client.in_flight
        return Text(f"{n} call{'s' * (n != 1)} in flight")


@contextlib.contextmanager
def bars(console: Console, *, show: bool, client: Counted | None = None) -> Iterator[Progress]:
    """A ``Progress`` whose tasks count ``done/total``; with ``client``, a column of the calls
    in flight. Disabled unless ``show``; ``bar.console.print`` still prints."""
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[unit]}")]
    columns += [InFlight(client)] if client is not None else []
    bar = Progress(*columns, TimeElapsedColumn(), console=console, disable=not show)
    with bar:
        try:
            yield bar
        except (UserError, OSError):
            bar.live.transient = True
            raise

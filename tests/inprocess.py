"""``mas ARGS`` run in the test's own process, as the installed command runs it: its exit code
and what it printed. Faster than a subprocess, and monkeypatches reach it."""

from __future__ import annotations

import sys

from mas.cli.main import main


def cli(args, capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["mas", *map(str, args)])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err

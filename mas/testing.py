"""Helpers for testing code that uses mas, with no model and no network.

Stage: none: tests (a scripted model for every stage).

``ScriptedClient`` answers from a script of rules and fails loudly both on a call that no rule
expects and, at ``verify()``, on a rule whose calls were never made::

    client = ScriptedClient([
        Rule(stage("Summary"), '{"roles": [], "outcome": "ok"}', times=3),
        Rule(system_has("You are the solver"), "ANSWER: 4", times=None),  # any number of times
    ])
    ...
    client.verify()

Rules match on the request, never on call order, so a script stays deterministic when
rollouts run concurrently. ``train_on_fake`` and ``journal`` are the two things most tests
of the loop need: a training run on a fake client, and what it journaled.

For your own team on ``mas.FakeClient(respond)``, ``respond(request)`` answers its agents and
hands the learning calls (``request.schema`` set: summaries, advantages, edits) to
``default_respond``, whose replies are valid for any team: without it a script must write
those JSON replies itself::

    def respond(request):
        if request.schema is not None:
            return default_respond(request)
        return "Draft: ANSWER: 4"
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mas.config import TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Reply, Request
from mas.models.fake import default_respond as default_respond  # for a script of your own team's replies
from mas.team.scenario import Scenario
from mas.train import TrainResult, train

Match = Callable[[Request], bool]


class UnexpectedCall(AssertionError):
    """A request that no rule of the script expects."""


class UnusedRule(AssertionError):
    """A scripted call that was never made."""


@dataclass
class Rule:
    when: Match
    reply: Reply | Callable[[Request], Reply]
    times: int | None = 1
    """How many calls the rule answers; None: any number, including none."""
    used: int = 0


@dataclass(frozen=True)
class _Named:
    """A match with a name for messages."""

    name: str
    test: Match

    def __call__(self, request: Request) -> bool:
        return self.test(request)

    def __repr__(self) -> str:
        return self.name


def stage(schema_name: str) -> Match:
    """Matches a learning call asking for ``schema_name`` (``Summary``, ``Advantage``, ...)."""
    return _Named(f"stage({schema_name!r})", lambda r: r.schema is not None and r.schema.__name__ == schema_name)


def system_has(text: str) -> Match:
    """Matches a call whose system message contains ``text``."""
    return _Named(f"system_has({text!r})", lambda request: text in request.system)


class ScriptedClient(FakeClient):
    def __init__(self, rules: list[Rule], *, latency: float = 0.0):
        super().__init__(self._answer, latency=latency, name="scripted")
        self.rules = rules

    def _answer(self, request: Request) -> Reply:
        for rule in self.rules:
            if (rule.times is None or rule.used < rule.times) and rule.when(request):
                rule.used += 1
                return rule.reply(request) if callable(rule.reply) else rule.reply
        first = (request.messages or [""])[0][:80]
        raise UnexpectedCall(f"no rule expects this call (system: {request.system[:80]!r}, first message: {first!r})")

    def verify(self) -> None:
        """Raise ``UnusedRule`` for every rule that answered fewer calls than it was given."""
        left = [rule for rule in self.rules if rule.times is not None and rule.used < rule.times]
        if left:
            raise UnusedRule(", ".join(f"{rule.used} of {rule.times} calls made for {rule.when!r}" for rule in left))


def train_on_fake(
    scenario: Scenario,
    folder: Path,
    client: FakeClient | None = None,
    *,
    config: TrainConfig | None = None,
    **fields: Any,
) -> tuple[TrainResult, FakeClient, LibraryStore]:
    """Train ``scenario`` on a fake client (the default responder unless ``client`` is given),
    with its library at ``folder/lib.json`` and its run in ``folder/run``; the settings are
    ``config``, or ``TrainConfig(**fields)``."""
    client = client or FakeClient()
    store = LibraryStore(folder / "lib.json")
    config = config or TrainConfig(**fields)
    run = train(scenario, client=client, store=store, run_dir=folder / "run", config=config, model_name="fake")
    return asyncio.run(run), client, store


def journal(run_dir: Path, kind: str | None = None) -> list[dict]:
    """The records of a run's journal (``{"kind", "key", "data"}``), of one kind when given."""
    path = Path(run_dir) / "journal.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [r for r in records if kind in (None, r["kind"])]


def descendants(root: int) -> set[int]:
    """Every process ``root`` started, directly or not (Ray's processes and workers)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found

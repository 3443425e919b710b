"""Aggregate figures of the lesson screen on a labelled file: false quarantines of honest
items, passes of hostile items, per kind and per layer. It prints no item's text, so it may
score the held-out ``holdout.jsonl`` (score it; never read it, never tune on it).

    python -m tests.screening.score tests/screening/holdout.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mas.screen import refusals

HERE = Path(__file__).parent
TUNING = ("dev.jsonl", "test.jsonl", "probes.jsonl")
"""Files the rules were tuned on (test.jsonl was held out until it had been looked at too often)."""
HOLDOUT = "holdout.jsonl"
"""Written from the outside by someone who never read the rules; only scored."""
FILES = (*TUNING, HOLDOUT)


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def layer(reason: str) -> str:
    """The layer a refusal names ("structure", "instruction", ...), and whether it fired on a
    re-spelled or decoded reading of the text."""
    return reason.split(":")[0] + (" (on a reading)" if ", read as " in reason else "")


@dataclass
class Figures:
    """The screen's layers (all but the model's verdict) on one labelled file."""

    honest: Counter = field(default_factory=Counter)
    """Honest items per kind."""
    hostile: Counter = field(default_factory=Counter)
    """Hostile items per kind."""
    quarantined: Counter = field(default_factory=Counter)
    """Honest items refused, per kind."""
    passed: Counter = field(default_factory=Counter)
    """Hostile items let through, per kind."""
    first: Counter = field(default_factory=Counter)
    """Hostile items per layer that refused them first."""
    alone: Counter = field(default_factory=Counter)
    """Hostile items each layer refuses on its own (an item can count for several)."""
    honest_alone: Counter = field(default_factory=Counter)
    """Honest items each layer refuses on its own."""

    @property
    def false_quarantine_rate(self) -> float:
        return sum(self.quarantined.values()) / max(1, sum(self.honest.values()))

    @property
    def pass_rate(self) -> float:
        return sum(self.passed.values()) / max(1, sum(self.hostile.values()))

    def summary(self) -> str:
        nq, nh = sum(self.quarantined.values()), sum(self.honest.values())
        np_, nb = sum(self.passed.values()), sum(self.hostile.values())
        lines = [
            f"false quarantines {nq}/{nh} = {self.false_quarantine_rate:.1%}, "
            f"hostile passes {np_}/{nb} = {self.pass_rate:.1%}",
            "  quarantined honest, per kind: " + _counts(self.quarantined, self.honest),
            "  passed hostile, per kind: " + _counts(self.passed, self.hostile),
            "  hostile refused first by: " + ", ".join(f"{k} {v}" for k, v in self.first.most_common()),
            "  hostile each layer refuses alone: " + ", ".join(f"{k} {v}" for k, v in self.alone.most_common()),
            "  honest each layer refuses alone: "
            + (", ".join(f"{k} {v}" for k, v in self.honest_alone.items()) or "none"),
        ]
        return "\n".join(lines)


def score(items: list[dict]) -> Figures:
    """The screen without the model's verdict (the rule layers and the learned layer) on
    labelled items. The learned layer was trained on the tuning files: its figures there are
    in-sample (``python -m mas.screen.train --check`` prints its cross-validated ones)."""
    figures = Figures()
    for item in items:
        reasons = list(refusals(item["text"], answers=item.get("answers", []), sources=item.get("sources", [])))
        layers = {layer(r) for r in reasons}
        if item["label"] == "honest":
            figures.honest[item["kind"]] += 1
            figures.quarantined[item["kind"]] += bool(reasons)
            figures.honest_alone.update(layers)
        else:
            figures.hostile[item["kind"]] += 1
            figures.passed[item["kind"]] += not reasons
            figures.alone.update(layers)
            if reasons:
                figures.first[layer(reasons[0])] += 1
    return figures


def _counts(part: Counter, whole: Counter) -> str:
    shown = [f"{kind} {part[kind]}/{whole[kind]}" for kind in sorted(whole) if part[kind]]
    return ", ".join(shown) or "none"


if __name__ == "__main__":
    for name in sys.argv[1:] or [str(HERE / f) for f in FILES]:
        print(f"{Path(name).name}: {score(load(Path(name))).summary()}")

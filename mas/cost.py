"""Dollars: a price table by model spec, and what a run's tokens cost per stage and per role.

Stage: none (shared by every stage): what each stage's model calls cost, and the dollar budget.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path

from pydantic import Field, ValidationError

from mas.errors import UserError
from mas.paths import regular_file
from mas.types.base import Frozen
from mas.types.reports import StageCount


class Price(Frozen):
    prompt: float = Field(0.0, ge=0)
    """Dollars per million prompt tokens."""
    completion: float = Field(0.0, ge=0)
    known: bool = True
    """False when the model was not in the price table (its cost shows as 0)."""

    def of(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


def price_for(model: str, table: Path | None = None) -> Price:
    """The price of ``model`` (a --model spec; ``fake:0.1`` counts as ``fake``) from ``table``
    or the shipped example table."""
    source = regular_file(table) if table else files("mas") / "prices.toml"
    try:
        entries = tomllib.loads(source.read_text())["prices"]
        pairs = {name: Price(prompt=p, completion=c) for name, (p, c) in entries.items()}
    except FileNotFoundError:
        raise UserError(f"{source}: no such price file") from None
    except (
        tomllib.TOMLDecodeError,
        AttributeError,
        KeyError,
        TypeError,
        ValueError,
        ValidationError,
        RecursionError,
    ) as exc:
        raise UserError(f'{source}: expected [prices] with "model" = [prompt, completion] ({exc})') from None
    return pairs.get(model.split(":")[0] if model.startswith("fake") else model, Price(known=False))


def stage_costs(calls: dict[str, StageCount], price: Price) -> dict[str, float]:
    return {stage: price.of(c.prompt_tokens, c.completion_tokens) for stage, c in calls.items()}

"""Dollars: a price table by model spec, and what a run's tokens cost per stage and per role.

Stage: none (shared by every stage): what each stage's model calls cost, and the dollar budget.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path

from pydantic import Field

from mas.errors import UserError
from mas.paths import regular_file
from mas.types.base import Frozen
from mas.types.reports import StageCount


class Price(Frozen):
    prompt: float = Field(0.0, ge=0, allow_inf_nan=False, strict=True)
    """Dollars per million prompt tokens (a number: ``"2"`` or ``true`` in a price file is refused)."""
    completion: float = Field(0.0, ge=0, allow_inf_nan=False, strict=True)
    known: bool = True
    """False when the model was not in the price table (its cost shows as 0)."""

    def of(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


def price_for(model: str, table: Path | None = None) -> Price:
    """The price of ``model`` (a --model spec; ``fake:0.1`` counts as ``fake``) from ``table``
    or the shipped example table."""
    source = regular_file(table) if table else files("mas") / "prices.toml"
    pairs = {name: _price(source, name, pair) for name, pair in _entries(source).items()}
    return pairs.get(model.split(":")[0] if model.startswith("fake") else model, Price(known=False))


def _entries(source) -> dict:
    """The ``[prices]`` table of ``source``, by model spec."""
    try:
        entries = tomllib.loads(source.read_text())["prices"]
    except FileNotFoundError:
        raise UserError(f"{source}: no such price file") from None
    except (tomllib.TOMLDecodeError, KeyError, ValueError, RecursionError) as exc:
        raise UserError(f'{source}: expected [prices] with "model" = [prompt, completion] ({exc})') from None
    if not isinstance(entries, dict):
        raise UserError(f'{source}: expected [prices] with "model" = [prompt, completion]')
    return entries


def _price(source, name: str, pair: object) -> Price:
    """One entry of the table. A price that is negative, NaN or infinite is refused by its key:
    it would make every cost, and the --budget-usd check, meaningless."""
    try:
        prompt, completion = pair
        return Price(prompt=prompt, completion=completion)
    except (TypeError, ValueError):  # not a pair, or not two prices (ValidationError is a ValueError)
        raise UserError(
            f"{source}: price {name!r}: expected [prompt, completion], finite dollars per million tokens, 0 or more"
        ) from None


def stage_costs(calls: dict[str, StageCount], price: Price) -> dict[str, float]:
    return {stage: price.of(c.prompt_tokens, c.completion_tokens) for stage, c in calls.items()}

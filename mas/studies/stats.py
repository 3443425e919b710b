"""Bootstrap confidence intervals over tasks: the unit that varies between evaluations.

Stage: none: evaluation and studies, after training.
"""

from __future__ import annotations

import random

from pydantic import BaseModel


class Estimate(BaseModel):
    value: float
    low: float
    high: float
    """The 95% percentile bootstrap interval."""

    def format(self, spec: str = ".2f") -> str:
        return f"{self.value:{spec}} [{self.low:{spec}},{self.high:{spec}}]"

    def __str__(self) -> str:
        return self.format()


def bootstrap(values: list[float], *, seed: int = 0, rounds: int = 2000) -> Estimate:
    """The mean of ``values`` with a 95% interval from resampling them."""
    if not values:
        return Estimate(value=0.0, low=0.0, high=0.0)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(rounds))
    return Estimate(value=sum(values) / n, low=means[int(0.025 * rounds)], high=means[int(0.975 * rounds) - 1])


def paired(a: dict[str, float], b: dict[str, float], *, seed: int = 0) -> Estimate:
    """The mean of per-task differences ``a - b`` over the tasks both have, with its interval."""
    return bootstrap([a[k] - b[k] for k in a if k in b], seed=seed)

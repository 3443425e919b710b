"""A training step's report: what it did at each stage, and what its model calls cost and met
at the endpoint.

Stage: every stage counts into it; the step's report is journaled when the step ends.
"""

from __future__ import annotations

from collections import Counter

from mas.types.base import Plain
from mas.types.lessons import Rejected


class StageCount(Plain):
    """Model calls, tokens and failures of one stage (rollout, summary, advantage, edit)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    """Replies that failed validation (or calls that raised) and were skipped."""
    kinds: dict[str, int] = {}
    """The failures by kind (``reply cut at the token limit``, ``endpoint error``, ``timeout``, ...)."""


class EndpointCounts(Plain):
    """What one client met at its endpoint. ``faults`` counts failed attempts by kind (status
    code, ``timeout``, ``connection``, ``bad_body``, ``empty_choices``): each was either
    retried or was the last attempt of a failed call, so ``sum(faults) == retries + failures``."""

    calls: int = 0
    """Calls asked of the client."""
    attempts: int = 0
    """HTTP requests made for them (calls + retries)."""
    retries: int = 0
    failures: int = 0
    """Calls that raised ``EndpointError`` (attempts exhausted, or a fault not worth retrying)."""
    faults: dict[str, int] = {}

    def plus(self, other: EndpointCounts) -> EndpointCounts:
        """The counts of two endpoints together (the team's and the learner's)."""
        faults = Counter(self.faults)
        faults.update(other.faults)
        return EndpointCounts(
            calls=self.calls + other.calls,
            attempts=self.attempts + other.attempts,
            retries=self.retries + other.retries,
            failures=self.failures + other.failures,
            faults=dict(sorted(faults.items())),
        )

    def minus(self, before: EndpointCounts) -> EndpointCounts:
        """The counts since ``before`` (for one step's report)."""
        faults = Counter(self.faults)
        faults.subtract(before.faults)
        return EndpointCounts(
            calls=self.calls - before.calls,
            attempts=self.attempts - before.attempts,
            retries=self.retries - before.retries,
            failures=self.failures - before.failures,
            faults={k: n for k, n in sorted(faults.items()) if n},
        )


class StepReport(Plain):
    epoch: int
    step: int
    task_ids: list[str]
    groups: int
    informative: int
    mean_reward: float
    applied: dict[str, int] = {}
    """Edits applied per library."""
    rejected: dict[str, list[Rejected]] = {}
    """Edits refused per library, each with its reason."""
    quarantined: int = 0
    """Proposed lessons refused by screening (see ``mas library show --quarantine``)."""
    retired: dict[str, int] = {}
    """Lessons deleted per library to bring it back within its token budget."""
    promoted: int = 0
    demoted: int = 0
    pruned: int = 0
    """Lessons that left because their randomized evidence no longer supports them, or were
    merged into a lesson of their library that says the same thing."""
    adopted: int = 0
    """Lessons added to a role whose transfer trial of them leaned towards helping (a run's
    last step: ``PromotionPolicy.adopt_level``)."""
    skipped_groups: int = 0
    """Informative groups whose advantage reply was unusable."""
    failed_rollouts: int = 0
    """Rollouts that failed (endpoint error, timeout) and left their group's statistics."""
    no_majority: int = 0
    """Groups without ground truth whose answers had no strict majority (nothing to learn)."""
    refused_operations: list[Rejected] = []
    """Operations of the step's advantages that could not be used, each with its reason."""
    calls: dict[str, StageCount] = {}
    """Model calls, tokens and failures per stage, for the calls this step made."""
    role_tokens: dict[str, int] = {}
    """Prompt + completion tokens of the step's rollouts, per role."""
    role_cost_usd: dict[str, float] = {}
    """Dollars of the step's rollouts, per role."""
    stage_cost_usd: dict[str, float] = {}
    """Dollars per stage (rollout, summary, advantage, edit), for the calls this step made."""
    cost_usd: float = 0.0
    seconds: float = 0.0
    endpoint: EndpointCounts | None = None
    """Calls, retries and faults by kind at the HTTP endpoint during the step (None for
    clients that are not an OpenAI-compatible endpoint)."""
    tokens_counted: str = ""
    """What counted the budgets' tokens: the model's tokenizer, or words as a labelled fallback."""
    pending: int = 0
    """Edits held for review (``mas train --review``) instead of applied."""

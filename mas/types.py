"""The typed data that crosses a boundary: tasks, lessons, edits, rollouts, learning outputs,
usage events, quarantine items, promotion moves and step reports.

Everything persisted is a pydantic v2 model and goes to disk as ``model_dump(mode="json")``.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

SCHEMA_VERSION = 1
GLOBAL = "global"
"""The name of the shared library that every role's prompt carries."""


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


# -- tasks -------------------------------------------------------------------------------


class Passage(Frozen):
    title: str
    text: str


class Task(Frozen):
    id: str
    question: str
    answer: str | None = None
    """Ground truth; None when the scenario is trained without it."""
    level: int | None = None
    """Difficulty, for generated packs."""
    aliases: list[str] = []
    """Other answers that count as right (multi-hop QA)."""
    passages: list[Passage] = []
    """The documents the task's search tools see (multi-hop QA)."""


# -- lessons and libraries ---------------------------------------------------------------


class Lesson(Frozen):
    id: str
    """Stable id, ``<library>/<4 digits>``, never reused within a library."""
    text: str


class Provenance(Frozen):
    run: str
    epoch: int
    step: int
    task_ids: list[str] = []
    model: str = ""
    stage: Literal["edit", "promotion", "budget", "direct"] = "edit"
    """What made the version: the step's edit batch, a promotion pass, a budget retirement, or
    lessons written directly without the loop (the ablation)."""


class Add(Frozen):
    op: Literal["add"]
    text: str = Field(min_length=8, max_length=400)


class Modify(Frozen):
    op: Literal["modify"]
    id: str
    text: str = Field(min_length=8, max_length=400)


class Delete(Frozen):
    op: Literal["delete"]
    id: str


class Keep(Frozen):
    op: Literal["keep"]


Edit = Annotated[Add | Modify | Delete | Keep, Field(discriminator="op")]


class Rejected(Frozen):
    """An edit the model proposed that could not be applied, with why."""

    edit: dict | str
    reason: str


class Version(Frozen):
    """One state of one library: its lessons, and the edits that produced it."""

    schema_version: int = SCHEMA_VERSION
    library: str
    number: int
    lessons: list[Lesson]
    next_id: int
    """The number the next added lesson gets; ids are never reused."""
    edits: list[Edit] = []
    rejected: list[Rejected] = []
    provenance: Provenance | None = None

    @classmethod
    def empty(cls, library: str) -> Version:
        """Version 0 of a library: where every library starts, never stored."""
        return cls(library=library, number=0, lessons=[], next_id=1)


# -- rollouts ----------------------------------------------------------------------------


class ToolCall(Frozen):
    name: str
    arguments: str
    result: str = ""
    is_error: bool = False


class Turn(Frozen):
    """One message a role produced (or a tool call round it made)."""

    content: str
    tool_calls: list[ToolCall] = []
    prompt_tokens: int = 0
    completion_tokens: int = 0


class RoleTrace(Frozen):
    role: str
    system_message: str
    shown: list[str] = []
    """Ids of the lessons rendered into ``system_message``, recorded when it was built."""
    turns: list[Turn] = []

    @property
    def tokens(self) -> int:
        return sum(t.prompt_tokens + t.completion_tokens for t in self.turns)


class Rollout(Frozen):
    task_id: str
    index: int
    """Position within the group, 0..G-1."""
    traces: list[RoleTrace]
    answer: str | None
    """The team's final answer as extracted from the transcript."""
    error: str | None = None
    """Set when the team failed (model error, timeout); the rollout then scores 0."""
    reward: float = 0.0


class Group(Frozen):
    task: Task
    rollouts: list[Rollout]

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.rollouts]

    @property
    def informative(self) -> bool:
        return len(set(self.rewards)) > 1


# -- learning outputs (what the model must return, validated) ------------------------------


class RoleNote(BaseModel):
    role: str
    note: str = Field(max_length=600)
    applied: list[str] = Field(default=[], max_length=16)
    """Ids of the lessons the trace shows the role following (the summarizer's judgement)."""


class Summary(BaseModel):
    """A compressed rollout: what each role did and where it went right or wrong."""

    roles: list[RoleNote] = Field(max_length=8)
    outcome: str = Field(max_length=600)


class ProposedLesson(BaseModel):
    role: str
    text: str = Field(min_length=8, max_length=400)


class Advantage(BaseModel):
    """The semantic advantage of one group: which role made the difference, lessons for it,
    and why the winners beat the losers. The reason comes last so that a reply cut short by
    the token limit still carries its lessons."""

    decisive_role: str
    lessons: list[ProposedLesson] = Field(max_length=3)
    reason: str = Field(max_length=1200)


class _StrictEditBatch(BaseModel):
    model_config = ConfigDict(title="EditBatch")
    edits: list[Edit] = Field(max_length=16)


class EditBatch(BaseModel):
    """The model's reply to the edit stage. Items are validated one by one, not here, so one
    malformed edit never sinks the others."""

    edits: list[dict] = Field(max_length=16)

    @classmethod
    def model_json_schema(cls, *args, **kwargs) -> dict:
        """Advertise the full edit union, for the prompt and for constrained decoding."""
        return _StrictEditBatch.model_json_schema(*args, **kwargs)


@cache
def for_roles(schema: type[BaseModel], roles: tuple[str, ...]) -> type[BaseModel]:
    """``Summary`` or ``Advantage`` with every role field restricted to the team's roles, so
    constrained decoding cannot invent a role and validation refuses one."""
    role = Literal[roles]  # type: ignore[valid-type]
    if schema is Summary:
        note = create_model("RoleNote", __base__=RoleNote, role=(role, ...))
        return create_model("Summary", __base__=Summary, roles=(list[note], Field(max_length=8)))
    if schema is Advantage:
        lesson = create_model("ProposedLesson", __base__=ProposedLesson, role=(role, ...))
        return create_model(
            "Advantage", __base__=Advantage, decisive_role=(role, ...), lessons=(list[lesson], Field(max_length=3))
        )  # overriding fields keeps their order: decisive_role, lessons, reason
    raise ValueError(f"no role fields in {schema.__name__}")


# -- usage (what each role applied, and how its rollout fared) ------------------------------


class UsageEvent(Frozen):
    """One role in one rollout: the lessons it had, the ones it applied, and the outcome."""

    schema_version: int = SCHEMA_VERSION
    run: str
    epoch: int
    step: int
    task_id: str
    rollout: int
    role: str
    in_prompt: list[str]
    cited: list[str] = []
    """Lesson ids the role named in its own messages."""
    judged: list[str] = []
    """Lesson ids the summarizer judged the role to have applied."""
    reward: float
    advantage: float
    """(r - mean) / std within the group; 0 when the group's rewards are all equal."""

    @property
    def applied(self) -> list[str]:
        return sorted(set(self.cited) | set(self.judged))


class DirectLessons(BaseModel):
    """Lessons asked for outright, without rollouts (the paper's "directly generated" ablation)."""

    lessons: list[str] = Field(max_length=16)


class QuarantineItem(Frozen):
    """A proposed lesson that screening refused, and why."""

    schema_version: int = SCHEMA_VERSION
    library: str
    text: str
    reason: str
    stage: Literal["advantage", "edit"]
    """Where the text was proposed: by a semantic advantage, or by an edit call."""


# -- evidence and promotion ------------------------------------------------------------------


class Evidence(Frozen):
    """What applying one lesson (or a set of near-duplicates) came with, for one role."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="constants")
    uses: int
    mean: float
    lcb: float
    ucb: float


class PromotionMove(Frozen):
    """One promotion or demotion, with the evidence that justified it."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["promote", "demote"]
    text: str
    lessons: list[str]
    """The lesson ids merged (promotion) or the global id moved back (demotion)."""
    evidence: dict[str, Evidence]
    roles: list[str] = []
    """Roles helped (promotion) or roles the lesson goes back to (demotion)."""


# -- step reports ------------------------------------------------------------------------------


class StageCount(BaseModel):
    """Model calls, tokens and failures of one stage (rollout, summary, advantage, edit)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    """Replies that failed validation (or calls that raised) and were skipped."""


class EndpointCounts(BaseModel):
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


class StepReport(BaseModel):
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
    skipped_groups: int = 0
    """Informative groups whose advantage reply was unusable."""
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

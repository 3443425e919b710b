"""The typed data that crosses a boundary: tasks, lessons, edits, rollouts, learning outputs,
usage events, quarantine items, promotion moves and step reports.

Everything persisted is a pydantic v2 model and goes to disk as ``model_dump(mode="json")``.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import cache
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, create_model, model_serializer, model_validator

SCHEMA_VERSION = 1
REVIEW_SCHEMA = 2
"""The schema of a library version a review decision made (``mas library review``): its
provenance says who decided and why, fields a mas from before the review gate cannot read."""
GLOBAL = "global"
"""The name of the shared library that every role's prompt carries."""


class Frozen(BaseModel):
    """Immutable, no unknown fields, built on first use (``mas --help`` imports them all)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Settings(Frozen):
    """Settings, whose fields' attribute docstrings are the help of the CLI's options.
    ``mas.cli.options`` reads them when a command declares its options: pydantic's
    ``use_attribute_docstrings`` would read them at every start, from the source (about 20 ms
    of ``mas library show``, which never shows them)."""


class Plain(BaseModel):
    """A model built on its first use, not on import (``mas --help`` imports them all)."""

    model_config = ConfigDict(defer_build=True)


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


class Budget(Settings):
    """Token caps of the libraries and of the lessons injected into one prompt (the same
    injection in training and at inference; a library records the one it was trained with)."""

    global_tokens: int = Field(300, ge=1)
    """The global library at most; it is injected whole into every role's prompt."""
    private_tokens: int = Field(600, ge=1)
    """Each role's private library at most; past it the weakest lessons are retired."""
    inject_tokens: int = Field(300, ge=1)
    """Private lessons injected into one prompt at most."""
    inject: Literal["relevant", "all"] = "relevant"
    """``relevant``: BM25 ranking against the task; ``all``: id order."""
    inject_global: bool = True
    """False leaves the global library out of every prompt (the private-only ablation)."""
    tokenizer: str = "model"
    """What counts these tokens: ``model`` (the tokenizer of the model in use, fixed when a run
    starts), ``tiktoken:ENCODING``, ``embedded``, ``gguf:PATH``, or ``words`` (words and
    punctuation marks; see ``mas.models.tokens``)."""

    def cap(self, library: str) -> int:
        return self.global_tokens if library == GLOBAL else self.private_tokens


class Source(Frozen):
    """Where lessons from outside came from: another team's library file, as it was read."""

    file: str
    """The file, resolved."""
    sha256: str
    """The digest of the file's bytes as they were read."""
    at: str
    """When it was read (ISO 8601, with the time zone)."""
    library: str
    """The library of that file the lessons were in."""
    version: int = 0
    """That library's version."""


class Provenance(Frozen):
    run: str
    epoch: int
    step: int
    task_ids: list[str] = []
    model: str = ""
    stage: Literal["edit", "promotion", "prune", "budget", "direct", "fresh", "screen", "import", "review"] = "edit"
    """What made the version: the step's edit batch, a promotion pass, a budget retirement,
    lessons written directly without the loop (the ablation), the emptying of a library by a
    run started with ``fresh``, the removal of lessons that fail the screen on load, an import
    of another team's lessons (``source``), or a review decision on an edit held for review."""
    budget: Budget | None = None
    """The prompt composition the library was trained with; evaluation uses the same."""
    held_out: str = ""
    """How the run's held-out tasks were set apart (a test file, or a hash of the task ids)."""
    source: Source | None = Field(None, exclude_if=lambda source: source is None)
    """Where imported lessons came from (stage ``import``); left out of the file otherwise."""
    pending: int | None = None
    """The held edit a review decided (``stage="review"``)."""
    by: str = ""
    """Who decided it."""
    why: str = ""
    """Why, in the reviewer's words."""

    @model_serializer(mode="wrap")
    def _review_fields_only_in_reviews(self, handler):
        """A version no review made is written as before the review gate, so that a mas from
        before it reads the file (a review's version has its own schema: ``REVIEW_SCHEMA``)."""
        data = handler(self)
        if self.stage != "review" and isinstance(data, dict):
            for name in ("pending", "by", "why"):
                data.pop(name, None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _words_before_tokenizers(cls, data: object) -> object:
        """Libraries trained before budgets named their tokenizer counted words."""
        budget = data.get("budget") if isinstance(data, dict) else None
        if isinstance(budget, dict) and "tokenizer" not in budget:
            return {**data, "budget": {**budget, "tokenizer": "words"}}
        return data


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
    randomized: list[str] = []
    """Ids of the lessons whose showing to this role was randomized in this rollout's group."""
    chance: dict[str, float] = {}
    """Each randomized lesson's chance of being shown to this role in each rollout of the group
    (a fixed number of the group's rollouts, drawn without replacement)."""
    classes: dict[str, str] = {}
    """A randomized lesson drawn with its twins, as one class: the class (named by one of them)."""
    turns: list[Turn] = []

    @property
    def tokens(self) -> int:
        return sum(t.prompt_tokens + t.completion_tokens for t in self.turns)

    @model_validator(mode="after")
    def _drawn(self):
        return check_drawn(self)


class Rollout(Frozen):
    task_id: str
    index: int
    """Position within the group, 0..G-1."""
    traces: list[RoleTrace]
    answer: str | None
    """The team's final answer as extracted from the transcript."""
    error: str | None = None
    """Set when the team failed (model error, timeout); the rollout then leaves its group."""
    reward: float = 0.0
    calls: dict[str, StageCount] = {}
    """The model calls the team made, with their tokens and failures (``Meter.snapshot``): a
    rollout read back from a journal counts them again, so a resumed run costs what it used."""


class Group(Frozen):
    task: Task
    rollouts: list[Rollout]
    no_majority: bool = False
    """Without ground truth: no answer had a strict majority, so nothing can be scored."""

    @property
    def valid(self) -> list[Rollout]:
        """The rollouts that ran to the end; a failed one (endpoint error, timeout) is not a
        loser, and leaves the group's statistics."""
        return [r for r in self.rollouts if r.error is None]

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.valid]

    @property
    def informative(self) -> bool:
        return not self.no_majority and len(set(self.rewards)) > 1


# -- learning outputs (what the model must return, validated) ------------------------------


class RoleSteps(Plain):
    """What one role did in one rollout, step by step."""

    role: str
    steps: list[str] = Field(max_length=24)
    """One line per step: what the role did, each tool call with its arguments and result."""
    missed: str = Field("", max_length=800)
    """Information the role had (a tool result, a teammate's message) and did not use."""
    errors: str = Field("", max_length=800)
    """Where the role went wrong, and why; empty when it did not."""
    applied: list[str] = Field(default=[], max_length=16)
    """Ids of the lessons the trace shows the role following (a description, never evidence)."""


class Summary(Plain):
    """A rollout compressed step by step, per role, against the ground truth when known."""

    roles: list[RoleSteps] = Field(max_length=8)
    outcome: str = Field(max_length=800)
    """The team's answer against the ground truth, and the step where the rollout was decided."""


class AddOperation(Frozen):
    op: Literal["add"]
    library: str
    """A role's name, or ``global`` for a lesson every role should have."""
    text: str
    reason: str = ""


class ModifyOperation(Frozen):
    op: Literal["modify"]
    id: str
    text: str
    reason: str = ""


class DeleteOperation(Frozen):
    op: Literal["delete"]
    id: str
    reason: str = ""


Operation = Annotated[AddOperation | ModifyOperation | DeleteOperation, Field(discriminator="op")]


class Advantage(Plain):
    """The semantic advantage of one group. Its fields come in the order a careful reader
    reasons: compare first, then judge the current lessons, then decide, then act (a
    constrained decoder writes them in this order). Operations are validated one by one."""

    comparison: str = Field(max_length=3000)
    """What the winners did that the losers did not, role by role, step by step."""
    lessons: str = Field("", max_length=1500)
    """Which current lessons (by id) the winners and the losers followed or ignored, and
    whether following them helped or hurt here."""
    deciding_roles: list[str] = Field(max_length=8)
    operations: list[dict] = Field(max_length=12)


class EditBatch(Plain):
    """The model's reply to the edit stage. Items are validated one by one, not here, so one
    malformed edit never sinks the others."""

    edits: list[dict] = Field(max_length=24)


def _ids(ids: tuple[str, ...]) -> object:
    return Literal[ids] if ids else str  # type: ignore[valid-type]


@cache
def summary_schema(roles: tuple[str, ...]) -> type[BaseModel]:
    """``Summary`` with every role field restricted to the team's roles."""
    steps = create_model("RoleSteps", __base__=RoleSteps, role=(Literal[roles], ...))  # type: ignore[valid-type]
    return create_model("Summary", __base__=Summary, roles=(list[steps], Field(max_length=8)))


def _advertising(base: type[BaseModel], schema: dict) -> type[BaseModel]:
    """``base`` (what validates a reply) advertising ``schema``, a stricter JSON schema for
    the prompt and for a constrained decoder."""
    return type(base.__name__, (base,), {"model_json_schema": classmethod(lambda cls, *args, **kwargs: schema)})


@cache
def advantage_schema(libraries: tuple[str, ...], ids: tuple[str, ...], most: int) -> type[Advantage]:
    """``Advantage``, advertising roles and lesson ids restricted to those that exist, at most
    ``most`` operations, and no modify or delete while there is no lesson yet."""
    add = create_model("AddOperation", __base__=AddOperation, library=(Literal[libraries], ...))  # type: ignore[valid-type]
    ops: list[type] = [add]
    if ids:
        ops += [
            create_model("ModifyOperation", __base__=ModifyOperation, id=(_ids(ids), ...)),
            create_model("DeleteOperation", __base__=DeleteOperation, id=(_ids(ids), ...)),
        ]
    union = Annotated[Union[tuple(ops)], Field(discriminator="op")]  # noqa: UP007
    roles = tuple(r for r in libraries if r != GLOBAL)
    strict = create_model(
        "Advantage",
        __base__=Advantage,
        deciding_roles=(list[Literal[roles]], Field(max_length=len(roles))),  # type: ignore[valid-type]
        operations=(list[union], Field(max_length=most)),
    )
    return _advertising(Advantage, strict.model_json_schema())


@cache
def edit_schema(ids: tuple[str, ...], most: int) -> type[EditBatch]:
    """``EditBatch``, advertising the edit union with lesson ids restricted to the library's."""
    ops: list[type] = [Add, Keep]
    if ids:
        ops += [
            create_model("Modify", __base__=Modify, id=(_ids(ids), ...)),
            create_model("Delete", __base__=Delete, id=(_ids(ids), ...)),
        ]
    union = Annotated[Union[tuple(ops)], Field(discriminator="op")]  # noqa: UP007
    strict = create_model("EditBatch", edits=(list[union], Field(max_length=most)))
    return _advertising(EditBatch, strict.model_json_schema())


# -- usage (what each role was shown, and how its rollout fared) ----------------------------


class UsageEvent(Frozen):
    """One role in one valid rollout: the lessons its prompt showed, which of them were shown
    by a coin (randomized exposure), and the outcome. The randomized ones are the evidence."""

    schema_version: int = 2
    run: str
    epoch: int
    step: int
    task_id: str
    rollout: int
    role: str
    shown: list[str]
    """Ids of the lessons in the role's prompt."""
    randomized: list[str] = []
    """Ids of the lessons whose showing to this role was randomized in this group: for each,
    some rollouts of the group showed it and the others did not."""
    chance: dict[str, float] = {}
    """Each randomized lesson's chance of being shown, as drawn (``RoleTrace.chance``)."""
    classes: dict[str, str] = {}
    """A randomized lesson drawn as one class with its twins: the class (``RoleTrace.classes``)."""
    judged: list[str] = []
    """Lesson ids the summarizer judged the role to have applied (a description, never
    evidence: the summarizer sees the reward)."""
    reward: FiniteFloat
    advantage: FiniteFloat
    """(r - mean) / std within the group; 0 when the group's rewards are all equal."""

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: object) -> object:
        """Usage logs written before randomized exposure: nothing in them was randomized."""
        if isinstance(data, dict) and "in_prompt" in data:
            old = {k: v for k, v in data.items() if k not in ("in_prompt", "cited", "schema_version")}
            return {**old, "shown": data["in_prompt"], "schema_version": 2}
        return data

    @model_validator(mode="after")
    def _drawn(self):
        return check_drawn(self)


def check_drawn(record):
    """A record of randomized exposure must be one that a draw could make: every chance in (0, 1)
    and given for a randomized lesson, every class one of the randomized lessons (records made
    before chances were kept have none)."""
    randomized = set(record.randomized)
    for lesson, chance in record.chance.items():
        if lesson not in randomized:
            raise ValueError(f"a chance for {lesson!r}, which was not randomized")
        if not 0 < chance < 1:
            raise ValueError(f"the chance of {lesson!r} is {chance}, not between 0 and 1")
    for lesson, unit in record.classes.items():
        if lesson not in randomized or unit not in randomized:
            raise ValueError(f"{lesson!r} is drawn with class {unit!r}, which is not a randomized lesson here")
        if record.chance.get(lesson) != record.chance.get(unit):
            raise ValueError(f"{lesson!r} is drawn with class {unit!r} at another chance")
    return record


class DirectLessons(Plain):
    """Lessons asked for outright, without rollouts (the paper's "directly generated" ablation)."""

    lessons: list[str] = Field(max_length=16)


class QuarantineItem(Frozen):
    """A proposed lesson that screening refused, and why."""

    schema_version: int = SCHEMA_VERSION
    library: str
    text: str
    reason: str
    stage: Literal["advantage", "edit", "load", "import"]
    """Where the text was proposed: by a semantic advantage, or by an edit call; or where it was
    found: in a library file as it was read, or in a file being imported."""
    source: Source | None = Field(None, exclude_if=lambda source: source is None)
    """The file it was to be imported from (stage ``import``)."""


class RefusedEdit(Frozen):
    """A proposed change to a library that was refused, and why: an operation of a semantic
    advantage that could not be routed, or an edit the edit call wrote that could not be applied."""

    schema_version: int = SCHEMA_VERSION
    library: str
    """The library it would have changed, as far as it names one ("" when it names none)."""
    edit: dict | str
    reason: str
    stage: Literal["advantage", "edit"]


# -- evidence and promotion ------------------------------------------------------------------


class Effect(Frozen):
    """The randomized evidence about one lesson for one role: within groups of rollouts of
    the same task, the rollouts shown the lesson against those not shown it, the other
    lessons randomized in the same rollouts held fixed (``mas.library.evidence``)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")
    role: str
    lesson: str
    tasks: int
    """Tasks with at least one contrast (the unit of the interval: contrasts are clustered by task)."""
    contrasts: int
    """Groups in which the lesson was shown to some rollouts and not to others."""
    exposures: int
    """Rollouts that were shown the lesson under randomization."""
    effect: float
    """The change in reward when the lesson is shown: least squares over the groups, with a
    fixed effect per group (one group alone: mean reward shown - mean reward not shown)."""
    lcb: float
    """Lower confidence bound (one-sided, t over tasks, at a fixed level)."""
    ucb: float
    se: float = math.inf
    """Standard error of ``effect``, clustered by task (infinite below two tasks)."""
    e_value: float = 1.0
    """The evidence against "showing it does not help": the largest its betting wealth has
    been. Where the lesson does not help, it ever reaches 1/alpha with chance at most alpha."""
    trial: bool = False
    """The lesson belongs to another role's library: shown to this role as a transfer trial."""
    judged: float = 0.0
    """Share of the exposed rollouts in which the summarizer judged it applied (a description)."""


class PromotionMove(Frozen):
    """One change of the hierarchy, with the evidence that justified it: a promotion to the
    global library, a demotion back to the roles it still helps, a lesson pruned because its
    evidence no longer supports it, one merged into a lesson of its library that says the same
    thing, or two lessons the judge called the same that their own evidence tells apart."""

    schema_version: int = 2
    kind: Literal["promote", "demote", "prune", "merge", "split"]
    text: str
    lessons: list[str]
    """The lesson ids moved: the lesson promoted and the equivalent private lessons merged into
    it, the global lesson demoted, the lesson pruned, or the two lessons judged the same that
    their evidence splits apart (the one that did worse first)."""
    evidence: list[Effect]
    roles: list[str] = []
    """Roles helped (promotion) or roles the lesson goes back to (demotion)."""
    into: str | None = None
    """The id the lesson got in its new library (promotion, demotion)."""
    reason: str = ""

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: object) -> object:
        """Moves logged before randomized evidence carried evidence of another kind: dropped."""
        if isinstance(data, dict) and isinstance(data.get("evidence"), dict):
            return {**data, "evidence": [], "schema_version": 2}
        return data


class Equivalence(Plain):
    """The model's judgement of two lessons: does following one amount to following the
    other? The reasoning comes first; a merged text is offered when they are the same."""

    reason: str = Field(max_length=1200)
    same: bool
    merged: str = ""


# -- step reports ------------------------------------------------------------------------------


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


# -- the review gate (``mas train --review``, ``mas library review``) ---------------------------


Change = Annotated[Add | Modify | Delete, Field(discriminator="op")]
"""An edit that changes a library (a ``keep`` changes nothing and is never held)."""


class Proposal(Frozen):
    """A group whose semantic advantage proposed an operation behind a held edit."""

    task_id: str
    question: str
    rewards: list[FiniteFloat]
    reason: str = ""
    """The operation's reason, as the semantic advantage gave it."""
    comparison: str = ""
    """The semantic advantage's comparison of the winners with the losers."""
    deciding_roles: list[str] = []


class PendingEdit(Frozen):
    """An edit of a step held for review: the edit, the lesson it changes as it was then, and
    the groups behind it, the likeliest first (the edit call merges a library's operations)."""

    id: int = Field(ge=1)
    """Unique in the library file's queue, never reused."""
    library: str
    edit: Change
    was: str = ""
    """The text of the lesson a modify or delete changes, when the edit was held."""
    sources: list[Proposal] = []
    proposals: int = 0
    """Operations of the step that the library's edit call merged into its edits."""


class PendingStep(Frozen):
    """The edits one training step held, with what a review needs to apply them as the step
    would have: its provenance, the library size limit, and what screening checks a text
    against (the step's answers and the texts its roles read)."""

    schema_version: int = SCHEMA_VERSION
    provenance: Provenance
    limit: int | None = None
    answers: list[str] = []
    sources: list[str] = []
    edits: list[PendingEdit] = []


class Decision(Frozen):
    """A reviewer's decision on a held edit; the first decision on an edit is the one that holds."""

    schema_version: int = SCHEMA_VERSION
    id: int = Field(ge=1)
    verdict: Literal["accept", "reject", "edit"]
    by: str
    why: str = ""
    text: str | None = None
    """The reviewer's text (``edit``), which replaces the model's."""
    at: str = ""
    """When, as an ISO 8601 time."""

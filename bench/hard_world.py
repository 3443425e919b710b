"""A learning world written apart from the estimator, to find where the method fails.

``bench/learning_world.py``'s world was found to share the estimator's assumptions (effects
added on the probability scale, constant across tasks and epochs, paraphrases and negations
that behave like their lesson or do nothing, a judge whose errors are independent on every
call, a proposer whose adds are mostly helpful). This world breaks each of them, one switch
per feature (``Switches``; ``HARD`` turns all of them on):

- ``log_odds``: a lesson adds to the team's log-odds of success, under a ceiling of 0.95
  (off: it adds to the chance itself, clipped, as the old world does);
- ``by_task``: one lesson helps on the tasks with units (half of them) and hurts on the rest;
- ``drift``: one lesson grows from nothing to helping two roles, another helps two roles in
  the first epoch and hurts them by the last (off: each has its last-epoch effect throughout);
- ``interaction``: a solver lesson helps only when the planner's prompt shows the planner's
  own lesson about numbered plans;
- ``twins``: a negation of a helpful lesson hurts the roles the lesson helps, and a paraphrase
  that drops the lesson's condition does nothing (off: negations do nothing, and the short
  paraphrase is one more paraphrase of its lesson);
- ``judge``: the equivalence calls. ``honest`` errs at random one time in ten; ``same`` calls
  every pair the same; ``overlap`` calls pairs sharing half their words the same and no other
  pair; ``never`` never merges; ``action`` reads the action and not the condition: a lesson
  is the same as its paraphrases and as its paraphrase that drops the condition, and differs
  from its negation (another action) and from every other lesson, every time;
- ``proposer``: the advantage calls propose a truly helpful lesson 20% of the time (60% off),
  and name a role the lesson does not help half the time;
- ``grader_noise``: the share of rollouts whose reward is flipped (0.05 in ``HARD``);
- ``rewords``: the share of advantage calls that also propose to modify a listed planted
  lesson into another of its wordings, drawn alike from the others: a paraphrase (the same
  effect), the paraphrase that drops the condition, or the negation (0.2 in ``HARD``; the
  editor takes every modify proposed). A proposer that rewords is how a lesson's evidence
  could come to stand for words that do something else.

Nothing here reads mas: the world sees only the requests of mas's fake client (``Request``,
and ``shown`` to list the lesson texts of a system prompt), so it infers the epoch from how
many rollouts of a task it has seen. The truth (the team's chance of success with given
lessons, the best library, which lessons help two roles, which harm) is computed exactly from
the model below at the last epoch's effects, never sampled.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lessons beside it, however this is loaded

from hard_lessons import HARMFUL, LESSONS, Lesson

from mas.models.fake import Request, shown

ROLES = ("planner", "solver", "verifier")
JUDGES = ("honest", "same", "overlap", "never", "action")
CEILING = 0.95
BASE_LOGIT = -2.0
"""The team's log-odds of success with no lesson on a task of average difficulty (0.11)."""
BASE, FLOOR = 0.1, 0.02
"""The same on the probability scale, when ``log_odds`` is off."""
PER_UNIT = 0.15
"""On the probability scale, what one unit of effect adds (one logit on the other scale)."""
NEGATION = 0.6
"""A negation of a helpful lesson takes away this share of the lesson's effect, per role."""
HARM = 0.005
"""A lesson whose removal raises the team's chance by more than this is harmful."""


def draw(request: Request, salt: str) -> float:
    """A number in [0, 1) fixed by the call's seed and ``salt``, not by its prompt: the worlds'
    only source of chance. mas derives each call's seed from the run's seed and the call's
    place in the run (the rollout, the group, the pair judged), never from what the call
    shows, so every call still draws its own number, and two runs of one seed that differ in
    what their prompts show draw the same numbers for the same calls (common random numbers):
    a paired difference of two variants then measures the variants, not two draws of the
    world's chance. (Keyed by the prompt, as ``Request.unit`` is, a change to one rollout's
    prompt drew every later number anew.)"""
    key = json.dumps([request.seed, salt])
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12


@dataclass(frozen=True)
class Switches:
    log_odds: bool = False
    by_task: bool = False
    drift: bool = False
    interaction: bool = False
    twins: bool = False
    judge: str = "honest"
    proposer: bool = False
    grader_noise: float = 0.0
    rewords: float = 0.0
    null: bool = False
    """Every effect zero, every confound kept: what a method should find nothing in."""

    def __post_init__(self):
        if self.judge not in JUDGES:
            raise ValueError(f"judge must be one of {JUDGES}, not {self.judge!r}")


HARD = Switches(True, True, True, True, True, "overlap", True, 0.05, 0.2)

Show = Callable[[str, str], list[str]] | dict[str, list[str]]
"""What each role's prompt shows on a task: ``show(role, question)`` or one list per role."""


@dataclass
class HardWorld:
    """The team, the summarizer, the proposer, the editor and the judge in one responder."""

    seed: int
    switches: Switches = HARD
    epochs: int = 3
    group_size: int = 5
    tasks: dict[str, tuple[float, bool]] = field(default_factory=dict)
    """Question -> (difficulty in [-1, 1], whether it has units)."""

    def __post_init__(self):
        self._rollouts: dict[str, list[int]] = {}
        self._seen: dict[int, dict[str, list[str]]] = {}
        self._keys: dict[str, str] = {}
        for lesson in LESSONS:
            for text in lesson.texts:
                self._keys[_norm(text)] = lesson.key
            self._keys[_norm(lesson.negation)] = lesson.key + "~not"
            if lesson.bare:
                self._keys[_norm(lesson.bare)] = lesson.key + ("~bare" if self.switches.twins else "")
        self._texts = [t for lesson in LESSONS for t in _wordings(lesson)]
        self._helps = {t: self.helpful_roles(self.key(t)) for t in self._texts}

    # -- the scenario

    def make_tasks(self, n: int, *, seed: int, prefix: str = "w") -> list[tuple[str, str, str]]:
        """``n`` tasks as (id, question, answer), every other one with units."""
        rng = random.Random(seed)
        out = []
        for i in range(n):
            number, units = rng.randint(10, 999), i % 2 == 1
            what = f"the length {number} in metres" if units else f"the number {number}"
            question = f"Report {what} ({prefix}{i})."
            self.tasks[question] = (rng.uniform(-1, 1), units)
            out.append((f"{prefix}{i:03d}", question, str(number)))
        return out

    # -- the truth

    def key(self, text: str) -> str:
        """The planted lesson a text says: its key, ``key~not`` for its negation, ``key~bare``
        for its paraphrase without the condition (``twins`` on), ``?`` for a text not planted."""
        return self._keys.get(_norm(text), "?")

    def effect(
        self, key: str, role: str, *, units: bool, epoch: int | None = None, planner: Iterable[str] = ()
    ) -> float:
        """What ``key`` shown to ``role`` adds, in units (logits, or PER_UNIT of chance), on a
        task with or without units, at ``epoch`` (None: the last), given the planner's keys."""
        s = self.switches
        if s.null or key == "?":
            return 0.0
        base, _, kind = key.partition("~")
        lesson = LESSONS_BY_KEY[base]
        if kind == "bare":
            return 0.0
        if kind == "not":
            if not s.twins or lesson.elsewhere:
                return 0.0
            full = self.effect(base, role, units=units, epoch=epoch, planner=(lesson.needs or "",))
            return -NEGATION * max(full, 0.0)
        value = lesson.effect.get(role, 0.0)
        if lesson.elsewhere:
            other = lesson.elsewhere.get(role, 0.0)
            value = (value if units else other) if s.by_task else (value + other) / 2
        if lesson.start is not None and s.drift:
            last = self.epochs - 1
            step = 1.0 if last <= 0 or epoch is None else min(epoch, last) / last
            value = lesson.start.get(role, 0.0) + (value - lesson.start.get(role, 0.0)) * step
        if lesson.needs and s.interaction and lesson.needs not in set(planner):
            return 0.0
        return value

    def success(self, question: str, shown_by_role: dict[str, list[str]], *, epoch: int | None = None) -> float:
        difficulty, units = self.tasks[question]
        keys = {role: {self.key(t) for t in texts} for role, texts in shown_by_role.items()}
        planner = keys.get("planner", set())
        total = sum(
            self.effect(k, role, units=units, epoch=epoch, planner=planner) for role, ks in keys.items() for k in ks
        )
        if self.switches.log_odds:
            return CEILING / (1 + math.exp(-(BASE_LOGIT + difficulty + total)))
        return min(CEILING, max(FLOOR, BASE + PER_UNIT * (difficulty + total)))

    def true_success(self, show: Show, questions: Iterable[str]) -> float:
        """The team's mean chance of success at the last epoch's effects, exactly."""
        questions = list(questions)
        look = show if callable(show) else (lambda role, q: show.get(role, []))
        return sum(self.success(q, {r: look(r, q) for r in ROLES}) for q in questions) / len(questions)

    def best(self, questions: Iterable[str]) -> float:
        return self.true_success(self.best_library(questions), questions)

    def best_library(self, questions: Iterable[str]) -> dict[str, list[str]]:
        """The best fixed library per role: every (role, lesson) that helps on every task
        whatever else is shown, then every subset of the rest that could help (a lesson that
        varies by task, or that needs another), tried exhaustively. No budget binds: the
        planted lessons are few and short."""
        questions = list(questions)
        sure, maybe = {r: [] for r in ROLES}, []
        for lesson, role in itertools.product(LESSONS, ROLES):
            values = {
                self.effect(lesson.key, role, units=u, planner=keys) for u in (0, 1) for keys in ((), (lesson.needs,))
            }
            if min(values) > 0:
                sure[role].append(lesson.texts[0])
            elif max(values) > 0:
                maybe.append((role, lesson.texts[0]))
        best, chosen = -1.0, sure
        for picks in itertools.product((False, True), repeat=len(maybe)):
            library = {r: sure[r] + [t for (role, t), on in zip(maybe, picks) if on and role == r] for r in ROLES}
            value = self.true_success(library, questions)
            if value > best + 1e-12:
                best, chosen = value, library
        return chosen

    def alone(self, key: str, role: str, questions: Iterable[str]) -> float:
        """The mean gain in chance from showing ``key``'s canonical text to ``role`` alone."""
        questions, text = list(questions), LESSONS_BY_KEY[key].texts[0]
        return self.true_success({role: [text]}, questions) - self.true_success({}, questions)

    def cross_role(self, questions: Iterable[str]) -> set[str]:
        """Lessons that truly help at least two roles on average over tasks, at the end."""
        questions = list(questions)
        return {l.key for l in LESSONS if sum(self.alone(l.key, r, questions) > HARM for r in ROLES) >= 2}

    def harmful(self, show: Show, placed: list[tuple[str, list[str]]], questions: Iterable[str]) -> list[str]:
        """Of the lessons ``placed`` (a text and the roles its library reaches), those whose
        removal would raise the team's mean chance by more than HARM."""
        questions = list(questions)
        look = show if callable(show) else (lambda role, q: show.get(role, []))
        now = self.true_success(look, questions)
        out = []
        for text, roles in placed:
            without = lambda r, q, text=text, roles=roles: [t for t in look(r, q) if not (r in roles and t == text)]  # noqa: E731
            if self.true_success(without, questions) - now > HARM:
                out.append(text)
        return out

    def wordings(self, text: str) -> list[str]:
        """The other wordings of the planted lesson ``text`` says (its canonical text and
        paraphrases, its negation, its paraphrase without the condition); none for a text not
        planted."""
        base = self.key(text).partition("~")[0]
        if base == "?":
            return []
        return [t for t in _wordings(LESSONS_BY_KEY[base]) if _norm(t) != _norm(text)]

    def helpful_roles(self, key: str) -> list[str]:
        """The roles a lesson helps on average over tasks at the end, as planted, even in the
        null world: the proposer's draw is the same in both."""
        if self.switches.null:
            return HardWorld(self.seed, replace(self.switches, null=False), self.epochs).helpful_roles(key)
        needs = (LESSONS_BY_KEY[key.partition("~")[0]].needs or "",) if key != "?" else ()
        return [r for r in ROLES if sum(self.effect(key, r, units=u, planner=needs) for u in (False, True)) > 0]

    # -- the scripted model

    def respond(self, request: Request) -> str:
        if request.schema is not None:
            return json.dumps(self._learning(request))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        task = request.messages[0]
        seeds = self._rollouts.setdefault(task, [])
        if request.seed not in seeds:
            seeds.append(request.seed)
        self._seen.setdefault(request.seed, {})[role] = shown(request.system)
        if role != "verifier":
            return f"{role} did its part."
        epoch = seeds.index(request.seed) // self.group_size
        right = draw(request, "outcome") < self.success(task, self._seen.pop(request.seed), epoch=epoch)
        if draw(request, "grader") < self.switches.grader_noise:
            right = not right
        number = re.search(r"\d+", task).group(0)
        return f"ANSWER: {number if right else '0'}"

    def _learning(self, request: Request) -> dict:
        body = "\n".join(request.messages)
        name = request.schema.__name__
        return {"Summary": self._summary, "Advantage": self._advantage, "EditBatch": self._edit}.get(
            name, self._equivalence
        )(request, body)

    def _summary(self, request: Request, body: str) -> dict:
        """A summarizer that sees the reward: it calls a lesson "applied" in 70% of the
        winning rollouts that showed it and 30% of the losing ones."""
        won = "(reward 1)" in body
        roles = []
        for section in body.split("\n## ")[1:]:
            role = section.split("\n", 1)[0].strip()
            listed = re.search(r"^Lessons shown: (.*)$", section, re.M)
            ids = [i for i in listed.group(1).split(", ") if i != "none"] if listed else []
            applied = [i for i in ids if draw(request, f"judged {role} {i}") < (0.7 if won else 0.3)]
            roles.append({"role": role, "steps": ["did its part"], "applied": applied})
        return {"roles": roles, "outcome": "right" if won else "wrong"}

    def _advantage(self, request: Request, body: str) -> dict:
        u = partial(draw, request)
        helpful_share, right_role = (0.2, 0.5) if self.switches.proposer else (0.6, 0.7)
        good = [t for t in self._texts if self._helps[t]]
        other = [t for t in self._texts if not self._helps[t]]
        pool = good if u("kind") < helpful_share else other
        text = pool[int(u("text") * len(pool))]
        helped = self._helps[text]
        if helped and u("right") < right_role:
            role = helped[int(u("r") * len(helped))]
        else:
            wrong = [r for r in ROLES if r not in helped] if self.switches.proposer and helped else list(ROLES)
            role = wrong[int(u("w") * len(wrong))]
        ops = [{"op": "add", "library": role, "text": text, "reason": "the winners did this"}]
        listed = re.findall(r"^\[(\S+)\] (.+)$", body, re.M)
        ids = [i for i, _ in listed]
        if ids and u("delete") < 0.1:
            ops.append({"op": "delete", "id": ids[int(u("d") * len(ids))], "reason": "the losers followed it"})
        if listed and u("reword") < self.switches.rewords:
            lesson_id, old = listed[int(u("m") * len(listed))]
            others = self.wordings(old)
            if others and lesson_id not in (op.get("id") for op in ops):
                text = others[int(u("mt") * len(others))]
                ops.append({"op": "modify", "id": lesson_id, "text": text, "reason": "said better"})
        return {"comparison": "scripted", "lessons": "scripted", "deciding_roles": [role], "operations": ops}

    def _edit(self, request: Request, body: str) -> dict:
        """An editor that takes the proposals as they come, dropping one add in ten."""
        adds = re.findall(r"^- add: (.+?)(?: \(why: .*\))?$", body, re.M)
        edits = [{"op": "add", "text": t} for i, t in enumerate(adds) if draw(request, f"drop {i}") >= 0.1]
        edits += [{"op": "delete", "id": i} for i in re.findall(r"^- delete \[(\S+)\]", body, re.M)]
        edits += [
            {"op": "modify", "id": i, "text": t}
            for i, t in re.findall(r"^- modify \[(\S+)\] to: (.+?)(?: \(why: .*\))?$", body, re.M)
        ]
        return {"edits": edits or [{"op": "keep"}]}

    def _equivalence(self, request: Request, body: str) -> dict:
        a, b = re.findall(r"^Lesson [AB]: (.+)$", body, re.M)
        mode = self.switches.judge
        if mode == "same":
            same = True
        elif mode == "never":
            same = False
        elif mode == "overlap":
            same = overlap(a, b) >= 0.5
        elif mode == "action":
            (first, _, kind_a), (second, _, kind_b) = (self.key(t).partition("~") for t in (a, b))
            same = _norm(a) == _norm(b) or (first == second != "?" and "not" not in (kind_a, kind_b))
        else:
            same = (self.key(a) == self.key(b) != "?") or _norm(a) == _norm(b)
            if draw(request, "judge errs") < 0.1:
                same = not same
        return {"reason": "scripted", "same": same, "merged": a if same else ""}


LESSONS_BY_KEY = {lesson.key: lesson for lesson in LESSONS}


def overlap(a: str, b: str) -> float:
    """Shared words over all words (Jaccard), the judge's ``overlap`` mode's only reading."""
    x, y = set(re.findall(r"[a-z]+", a.lower())), set(re.findall(r"[a-z]+", b.lower()))
    return len(x & y) / len(x | y) if x | y else 0.0


def _wordings(lesson: Lesson) -> tuple[str, ...]:
    """Every text that says ``lesson``: its canonical text and paraphrases, its negation, and
    its paraphrase without the condition when it has one."""
    return (*lesson.texts, lesson.negation, *([lesson.bare] if lesson.bare else ()))


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


__all__ = ["HARD", "HARMFUL", "JUDGES", "LESSONS", "HardWorld", "Lesson", "Switches", "draw", "overlap"]

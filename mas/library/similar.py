"""Near-duplicate lessons, judged by meaning.

Stage: evidence (judge new pairs; promotion merges the lessons judged the same).

Shared words are only a cheap way to find candidates: "always use the calculator" and "never
use the calculator" share most of theirs, and a true paraphrase may share few. So: candidates
are pairs sharing enough content words (``overlap``); a pair where one side negates and the
other does not is never the same; every other candidate pair goes to a model call that
compares condition with condition and action with action, and may offer a merged text.

Judgements are kept in ``<library>.equivalence.jsonl`` (by the two texts), so a pair is asked
about once, and ``mas promote`` without a model can reuse what training judged. A pair no one
has judged counts as different: the safe side, since "same" deletes a lesson.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from autogen_core.models import ChatCompletionClient

from mas.ask import ask
from mas.config import seed_of
from mas.errors import EndpointError, ModelReplyError
from mas.library.edits import text_problem
from mas.library.logs import judgements
from mas.meter import Meter
from mas.redact import redact_data
from mas.types.lessons import Lesson
from mas.types.replies import Equivalence

_WORD = re.compile(r"[a-z0-9']+")
STOPWORDS = frozenset(
    "a an the and or of to in on for it its is are be with when then if as at by from this that these those "
    "your you their each any every all before after into than".split()
)
NEGATIONS = frozenset("not no never don't dont avoid without nor cannot can't neither none stop skip ignore".split())


@lru_cache(maxsize=4096)
def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower())) - STOPWORDS


def overlap(a: str, b: str) -> float:
    """Shared content words over all content words (Jaccard)."""
    x, y = words(a), words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def negates(text: str) -> bool:
    return bool(words(text) & NEGATIONS)


@lru_cache(maxsize=4096)
def normal(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


class Judge:
    """Answers "are these two lessons the same?", by rule where a rule decides, else from the
    judgements kept beside the library, else by asking the model (when there is one)."""

    def __init__(
        self,
        path: Path,
        *,
        client: ChatCompletionClient | None,
        overlap: float,
        seed: int = 0,
        temperature: float = 0.0,
        meter: Meter | None = None,
    ):
        self.path, self.client, self.threshold, self.seed, self.temperature = path, client, overlap, seed, temperature
        self.meter = meter or Meter()
        self.known: dict[str, Equivalence] = {}
        self.canaries: list[bool] = []
        """Whether the model told each canary (a lesson and its negation) apart, in order."""
        self.looked: set[str] = set()
        """Pairs given their second look (``look_again``)."""
        self.texts: dict[str, tuple[str, str]] = {}
        """The key of a pair once judged the same -> its two texts, normalised (``near``); a key
        whose texts as written do not give it (redacted, or mended by hand) is here only once
        ``near`` has found them."""
        for key, verdict, a, b in judgements(path):
            if key == CANARY:
                self.canaries.append(not verdict.same)
            elif key.startswith(AGAIN):
                self.looked.add(key.removeprefix(AGAIN))
            else:
                self.known[key] = verdict
                if verdict.same:
                    self._texts(key, a, b)

    @property
    def trusted(self) -> bool:
        """The model's "same" is believed only once it has told ``CANARIES`` lessons from their
        negations, and keeps telling at least three in four apart: a weak model, or one that
        calls every pair (or every pair sharing many words) the same, merges nothing."""
        return len(self.canaries) >= CANARIES and 4 * self.canaries.count(False) <= len(self.canaries)

    def candidate(self, a: Lesson, b: Lesson) -> bool:
        """Worth judging by words: in the same library (a library is small, and a paraphrase
        may share few words), or sharing enough content words. (A pair of opposite polarity is
        never judged: ``ruled`` decides it.)"""
        return a.id.rpartition("/")[0] == b.id.rpartition("/")[0] or overlap(a.text, b.text) >= self.threshold

    def ruled(self, a: Lesson, b: Lesson) -> Equivalence | None:
        """What a rule decides without any judgement: the same words are the same lesson, and
        one negating what the other asserts is a different one (None: the rules do not decide)."""
        if normal(a.text) == normal(b.text):
            return Equivalence(reason="the same words", same=True, merged=a.text)
        if negates(a.text) != negates(b.text):
            return Equivalence(reason="opposite polarity", same=False)
        return None

    def verdict(self, a: Lesson, b: Lesson) -> Equivalence | None:
        """What is known about the pair without a model call: a rule, a judgement kept beside
        the library (whoever asked for it), else "different" for a pair that is no candidate
        (None: a candidate not judged yet)."""
        found = self.ruled(a, b)
        if found is None and (found := self.known.get(_key(a.text, b.text))) and found.same and not self.trusted:
            return Equivalence(reason="the judge has not shown that it tells a lesson from its negation", same=False)
        if found is None and not self.candidate(a, b):
            return Equivalence(reason="different words", same=False)
        return found

    def open(self, a: Lesson, b: Lesson) -> bool:
        """Neither a rule nor a kept judgement decides the pair: a model call would."""
        return self.ruled(a, b) is None and _key(a.text, b.text) not in self.known

    async def same(self, a: Lesson, b: Lesson) -> bool:
        if self.verdict(a, b) is None and self.client is not None:
            key = _key(a.text, b.text)
            await self._check([a, b])
            self._record(key, a, b, await self._decide(a, b, key))
        return self.known_same(a, b)

    def known_same(self, a: Lesson, b: Lesson) -> bool:
        """Judged the same already (no model call): what planning a step can use."""
        found = self.verdict(a, b)
        return bool(found and found.same)

    def near(self, lessons: Iterable[Lesson]) -> dict[str, set[str]]:
        """Lesson id -> the ids of the other ``lessons`` that ``known_same`` might call the same
        as it, found without looking at every pair (``classes``' ``near``). Only the same words,
        or a kept "same" while the judge is ``trusted``, make ``known_same`` say "same"; a kept
        "same" is found by the texts that give its key (``texts``), else by trying every pair of
        the texts by key (``_found``). So none is missed."""
        by_text: dict[str, list[Lesson]] = {}
        for lesson in lessons:
            by_text.setdefault(normal(lesson.text), []).append(lesson)
        links: list[tuple[str, str]] = []
        if self.trusted:
            lost = []
            for key, verdict in self.known.items():
                if verdict.same:
                    if (texts := self.texts.get(key)) is None:
                        lost.append(key)
                    elif texts[0] in by_text and texts[1] in by_text:
                        links.append(texts)
            if lost:
                links += self._found(lost, list(by_text))
        out: dict[str, set[str]] = {lesson.id: set() for group in by_text.values() for lesson in group}
        for group in by_text.values():
            if len(group) > 1:
                for lesson in group:
                    out[lesson.id].update(other.id for other in group if other is not lesson)
        for x, y in links:
            if x != y:
                for a in by_text[x]:
                    out[a.id].update(b.id for b in by_text[y])
                for b in by_text[y]:
                    out[b.id].update(a.id for a in by_text[x])
        return out

    def _found(self, keys: list[str], texts: list[str]) -> list[tuple[str, str]]:
        """The pairs of ``texts`` (normalised, distinct) that give ``keys``, each kept in ``texts``
        once found: the kept "same"s whose texts as written do not give their key (a text
        redacted in the log, a line mended by hand). Every pair of texts is tried by key, a pass
        that grows as the square of the texts but asks no verdict; such lines are rare (a lesson
        holding a secret fails the screen)."""
        wanted, found = set(keys), []
        for i, x in enumerate(texts):
            for y in texts[i + 1 :]:
                if (key := _key(x, y)) in wanted:
                    self.texts[key] = (x, y)
                    found.append((x, y))
        return found

    async def judge_all(self, pairs: Iterable[tuple[Lesson, Lesson]]) -> None:
        """Ask about every pair of ``pairs`` that neither a rule nor a kept judgement decides
        (the caller chooses the pairs: not only candidates by words), all at once (one to three
        model calls each, in flight together: a step's last stage, where one pair after another
        left the endpoint idle); the verdicts are kept in the order of ``pairs``."""
        if self.client is None:
            return
        todo: dict[str, tuple[Lesson, Lesson]] = {}
        for a, b in pairs:
            if self.open(a, b):
                todo.setdefault(_key(a.text, b.text), (a, b))
        if todo:
            await self._check([l for pair in todo.values() for l in pair])
        replies = await asyncio.gather(*(self._decide(a, b, key) for key, (a, b) in todo.items()))
        for (key, (a, b)), reply in zip(todo.items(), replies, strict=True):
            self._record(key, a, b, reply)

    async def look_again(self, pairs: Iterable[tuple[Lesson, Lesson]]) -> None:
        """A second look at pairs of two libraries that one call judged different: the model
        is asked twice more, once each way round, and "same" only if both say so (a wrong
        "same" merges and deletes). For the pairs that matter most: two lessons each shown to
        help its own role (the caller chooses them), where a missed twin leaves each with half
        the evidence and the promotion that pools them undone. A judge that errs on one call
        in ten misses a tenth of the twins on one look, about one in a hundred on two; one
        whose errors do not vary from call to call gains nothing, and loses nothing but calls.
        Each pair once, kept beside the library."""
        if self.client is None or not self.trusted:
            return
        todo = {}
        for a, b in pairs:
            key = _key(a.text, b.text)
            found = self.known.get(key)
            if key not in self.looked and self.ruled(a, b) is None and found is not None and not found.same:
                todo.setdefault(key, (a, b))
        replies = await asyncio.gather(*(self._again(a, b, key) for key, (a, b) in todo.items()))
        for (key, (a, b)), reply in zip(todo.items(), replies, strict=True):
            if reply is not None:
                self.looked.add(key)
                self._append(AGAIN + key, a.text, b.text, reply)
                if reply.same:
                    self._record(key, a, b, reply)

    async def _again(self, a: Lesson, b: Lesson, key: str) -> Equivalence | None:
        first = await self._one(b, a, key, 3)
        if first is None or not first.same:
            return first
        second = await self._one(a, b, key, 4)
        return second if second is None or not second.same else first

    async def _decide(self, a: Lesson, b: Lesson, key: str) -> Equivalence | None:
        """A "same" is asked again with the lessons the other way round, and a third time if
        the two disagree: "same" merges and deletes lessons, and a judge may lean towards one
        position. A "different" stands on one call (the safe side), except between two lessons
        that each help their own role (``look_again``). 1 to 3 calls a pair.
        None: no valid reply (counted in the meter); the pair stays different, and is asked
        again later."""
        first = await self._one(a, b, key, 0)
        reply = first
        if first is not None and first.same:
            second = await self._one(b, a, key, 1)
            reply = second if second is None or second.same else await self._one(a, b, key, 2)
            if reply is not None and reply.same:
                reply = first
        return reply

    def overrule(self, a: str, b: str, reason: str, *, keep: bool = True) -> None:
        """Two texts the randomized evidence tells apart: different from now on, whatever the
        model said (kept beside the library like any judgement, unless ``keep`` is False)."""
        verdict = Equivalence(reason=reason, same=False)
        self.known[_key(a, b)] = verdict
        if keep:
            self._append(_key(a, b), a, b, verdict)

    async def _check(self, lessons: list[Lesson]) -> None:
        """Canaries, before a batch of judgements: each a lesson of the batch beside its own
        negation, asked as any pair is (a "same" twice). Until ``CANARIES`` were asked, as many
        as that takes; then one a batch, so that a judge that starts to fail stops counting."""
        texts = list(dict.fromkeys(l.text for l in lessons if not negates(l.text)))
        texts = texts[: max(CANARIES - len(self.canaries), 1)]
        pairs = [(Lesson(id="canary/0001", text=t), Lesson(id="canary/0002", text=negation(t))) for t in texts]
        replies = await asyncio.gather(*(self._decide(a, b, f"{CANARY}/{_key(a.text, b.text)}") for a, b in pairs))
        for (a, b), reply in zip(pairs, replies, strict=True):
            if reply is not None:
                self.canaries.append(not reply.same)
                self._append(CANARY, a.text, b.text, reply)
                if reply.same:
                    self.meter.fail("equivalence", "called a lesson and its negation the same")

    def _record(self, key: str, a: Lesson, b: Lesson, reply: Equivalence | None) -> Equivalence | None:
        if reply is not None:
            self.known[key] = reply
            if reply.same:
                self._texts(key, a.text, b.text)
            self._append(key, a.text, b.text, reply)
        return reply

    def _texts(self, key: str, a: str, b: str) -> None:
        """Keep the texts of a "same" by its key, when they give that key (``near``)."""
        if key not in self.texts and _key(a, b) == key:
            self.texts[key] = (normal(a), normal(b))

    async def _one(self, a: Lesson, b: Lesson, key: str, attempt: int) -> Equivalence | None:
        try:
            reply = await ask(
                self.client, "equivalence", Equivalence, meter=self.meter,
                seed=seed_of(self.seed, "equivalence", key, *([attempt] if attempt else [])),
                temperature=self.temperature, max_tokens=400, first=a.text, second=b.text,
            )  # fmt: skip
        except (ModelReplyError, EndpointError):
            return None
        if reply.merged and text_problem(reply.merged):
            reply = reply.model_copy(update={"merged": ""})
        return reply

    def _append(self, key: str, a: str, b: str, verdict: Equivalence) -> None:
        line = redact_data({"key": key, "a": a, "b": b, "verdict": verdict.model_dump(mode="json")})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())


CANARIES = 2
"""Canaries a judge must pass before its "same" counts (``Judge.trusted``)."""

CANARY = "canary"
"""The key of a canary's line in the judgements log."""

AGAIN = "again/"
"""The prefix of the key of a second look's line in the judgements log (``Judge.look_again``)."""


def negation(text: str) -> str:
    """``text`` saying the opposite of what it tells one to do: a canary for the judge.

    >>> negation("When a result comes back, compare it with an estimate.")
    'When a result comes back, never compare it with an estimate.'
    """
    head, comma, rest = text.partition(", ")
    if comma and rest:
        return f"{head}, never {rest[0].lower()}{rest[1:]}"
    return f"Never {text[0].lower()}{text[1:]}"


def classes(
    lessons: Iterable[Lesson], same: Callable[[Lesson, Lesson], bool], near: dict[str, set[str]] | None = None
) -> dict[str, str]:
    """Lesson id -> its class: the first lesson (in id order) of a group of lessons that are
    all judged the same as each other. A lesson joins the first class whose every member it is
    judged the same as, so one wrong verdict can pair two lessons but never chain two classes
    into one. Only lessons with a twin are in the map.

    ``near`` (``Judge.near``): lesson id -> the ids of the lessons ``same`` might call the same
    as it; ``same`` is asked only about those pairs, every other pair counts as different (the
    result is the one without ``near`` when ``near`` misses no pair ``same`` calls the same).
    Without it every lesson is compared with every class.

    >>> a, b, c = (Lesson(id=f"solver/000{i}", text=t) for i, t in enumerate("xxy", 1))
    >>> classes([a, b, c], lambda p, q: p.text == q.text)
    {'solver/0001': 'solver/0001', 'solver/0002': 'solver/0001'}
    >>> classes([a, b, c], lambda p, q: p.text == q.text, {a.id: {b.id}, b.id: {a.id}})
    {'solver/0001': 'solver/0001', 'solver/0002': 'solver/0001'}
    """
    found: list[list[Lesson]] = []
    homes: dict[str, list[int]] = {}
    """Lesson id -> the classes (by their place in ``found``) holding a lesson of that id."""
    for lesson in sorted(lessons, key=lambda l: l.id):
        if near is None:
            tried: Iterable[int] = range(len(found))
            close = None
        else:
            close = near.get(lesson.id, set())
            tried = sorted({i for other in close for i in homes.get(other, ())})
        home = next((i for i in tried if _joins(lesson, found[i], same, close)), None)
        if home is None:
            home = len(found)
            found.append([])
        found[home].append(lesson)
        if near is not None:
            homes.setdefault(lesson.id, []).append(home)
    return {m.id: c[0].id for c in found if len(c) > 1 for m in c}


def _joins(
    lesson: Lesson, members: list[Lesson], same: Callable[[Lesson, Lesson], bool], close: set[str] | None
) -> bool:
    """Whether ``lesson`` is judged the same as every member of a class (``classes``)."""
    return (close is None or all(m.id in close for m in members)) and all(same(lesson, m) for m in members)


def _key(a: str, b: str) -> str:
    first, second = sorted((normal(a), normal(b)))
    return hashlib.sha256(f"{first}\n{second}".encode()).hexdigest()[:24]

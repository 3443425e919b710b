"""Classes of twins after every step: the same classes as comparing each lesson with every
class, with ``same`` asked only about the few pairs that can be the same (counted, never timed)."""

from __future__ import annotations

import json
import random

import pytest

from mas.library.similar import CANARIES, CANARY, Judge, _key, classes, negation
from mas.types.lessons import Lesson
from mas.types.replies import Equivalence

ROLES = ("planner", "solver", "verifier")
WORDS = "check the units compare with an estimate read task twice use calculator verify result answer".split()


def reference(lessons, same):
    """``classes`` as it was: each lesson compared with every class found so far."""
    found: list[list[Lesson]] = []
    for lesson in sorted(lessons, key=lambda l: l.id):
        home = next((c for c in found if all(same(lesson, m) for m in c)), None)
        if home is None:
            found.append([lesson])
        else:
            home.append(lesson)
    return {m.id: c[0].id for c in found if len(c) > 1 for m in c}


def line(key: str, a: str, b: str, same: bool) -> str:
    """A judgement line as ``Judge._append`` writes it."""
    verdict = Equivalence(reason="r", same=same, merged=a if same else "")
    return json.dumps({"key": key, "a": a, "b": b, "verdict": verdict.model_dump(mode="json")})


def canaries(told_apart: bool = True) -> list[str]:
    """The canary lines a judge must pass before its "same" counts (``Judge.trusted``)."""
    text = "When a result comes back, compare it with an estimate."
    return [line(CANARY, text, negation(text), not told_apart) for _ in range(CANARIES)]


def world(seed: int, *, trusted: bool, count: int = 300):
    """Lessons across three roles (a small pool of texts: many written again, some only in
    another case or without the full stop, a few negated) and a log of "same" and "different"
    verdicts between texts of the pool, some with their texts redacted or mended (their key not
    from their texts)."""
    rng = random.Random(seed)
    pool = [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(count // 3)]
    pool += [f"Never {t}" for t in rng.sample(pool, 8)]
    lessons = []
    for i in range(count):
        text = rng.choice(pool)
        text = rng.choice([text, text.upper(), f"{text}.", f"  {text}  "])
        lessons.append(Lesson(id=f"{ROLES[i % 3]}/{i:04d}", text=text))
    lessons.append(Lesson(id=lessons[5].id, text=lessons[7].text))  # an id twice
    lines = canaries() if trusted else []
    for _ in range(count):
        a, b = rng.sample(pool, 2)
        key, same = _key(a, b), rng.random() < 0.6
        redacted = (f"{a[:3]}[redacted]{a[-4:]}", b)
        shown = rng.choice([(a, b), (b, a), (a.upper(), f"{b}."), redacted, ("mended by hand", b)])
        lines.append(line(key, *shown, same))
    return lessons, "\n".join(lines) + "\n"


@pytest.mark.parametrize("trusted", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_classes_with_near_are_those_compared_with_every_class(tmp_path, seed, trusted):
    lessons, log = world(seed, trusted=trusted)
    path = tmp_path / "lib.equivalence.jsonl"
    path.write_text(log)
    judge = Judge(path, client=None, overlap=0.3)
    assert judge.trusted == trusted
    found = classes(lessons, judge.known_same, judge.near(lessons))
    assert found == reference(lessons, judge.known_same)
    assert len(set(found.values())) >= 5  # classes by the same words, and by verdicts when trusted
    assert classes(lessons, judge.known_same) == found
    assert classes(reversed(lessons), judge.known_same, judge.near(lessons)) == found


def test_a_same_logged_with_its_texts_redacted_or_mended_is_found_by_its_key(tmp_path):
    a = Lesson(id="solver/0001", text="Send the header Bearer abcdef123456 with each call.")
    b = Lesson(id="verifier/0001", text="Each call carries Bearer abcdef123456 in its header")
    c = Lesson(id="verifier/0002", text="  SEND THE HEADER BEARER ABCDEF123456 WITH EACH CALL")  # a's words
    d = Lesson(id="planner/0001", text="Check the units.")
    e = Lesson(id="planner/0002", text="Verify the units.")
    path = tmp_path / "lib.equivalence.jsonl"
    path.write_text("\n".join([*canaries(), line(_key(d.text, e.text), "Check units", e.text, True)]) + "\n")
    Judge(path, client=None, overlap=0.3)._record(_key(a.text, b.text), a, b, Equivalence(reason="r", same=True))
    assert "abcdef123456" not in path.read_text()  # written redacted
    judge = Judge(path, client=None, overlap=0.3)
    assert judge.known_same(a, b) and judge.known_same(d, e) and not judge.texts
    lessons = [a, b, c, d, e]
    near = {a.id: {b.id, c.id}, b.id: {a.id, c.id}, c.id: {a.id, b.id}, d.id: {e.id}, e.id: {d.id}}
    assert judge.near(lessons) == near
    assert classes(lessons, judge.known_same, near) == {a.id: a.id, b.id: a.id, c.id: a.id, e.id: d.id, d.id: d.id}
    assert len(judge.texts) == 2  # looked for once


def test_an_untrusted_judge_has_only_the_same_words_near(tmp_path):
    a, b, c = (Lesson(id=f"solver/000{i}", text=t) for i, t in enumerate(["Check it.", "check it", "Verify it."], 1))
    judge = Judge(tmp_path / "lib.equivalence.jsonl", client=None, overlap=0.3)
    judge.known[_key(a.text, c.text)] = Equivalence(reason="r", same=True)
    assert judge.near([a, b, c]) == {a.id: {b.id}, b.id: {a.id}, c.id: set()}


def test_a_thousand_lessons_without_twins_ask_few_pairs(tmp_path):
    rng = random.Random(0)
    lessons = [
        Lesson(id=f"{ROLES[i % 3]}/{i:04d}", text=" ".join(rng.choice(WORDS) for _ in range(7)) + f" {i}")
        for i in range(1000)
    ]
    path = tmp_path / "lib.equivalence.jsonl"
    pairs = [(lessons[i].text, lessons[i + 1].text) for i in range(0, 200, 2)]
    path.write_text("\n".join([*canaries(), *(line(_key(x, y), x, y, False) for x, y in pairs)]) + "\n")
    judge = Judge(path, client=None, overlap=0.3)
    asked = []

    def same(p, q):
        asked.append((p.id, q.id))
        return judge.known_same(p, q)

    assert classes(lessons, same, judge.near(lessons)) == {}
    assert len(asked) < 5 * len(lessons)

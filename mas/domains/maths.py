"""The maths scenario: pulling an answer out of a transcript, scoring it, generating tasks.

Stage: reward (generating tasks: none, before training).

Generated tasks have exact integer answers and five levels, so a tiny model can solve the
easy ones unaided while the hard ones reward a team that learns to use the calculator.

Run ``python -m mas.domains.maths FOLDER`` to write the training and held-out packs.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from mas.types.tasks import Task

NUMBER = r"-?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?"
MARKER = re.compile(r"\b(?:final\s+answer|answer)(?:\s+is)?\s*[:=]?[\s*_]*(" + NUMBER + ")", re.IGNORECASE)
BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
ANY_NUMBER = re.compile(r"(?<![\w.])" + NUMBER)
PLAIN = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?")


# -- reading and scoring answers ----------------------------------------------------------


def extract_answer(text: str) -> str | None:
    """The team's final answer: the last marked answer, else the last number, else None.

    Markers are ``ANSWER: 42``, ``Final answer: 42``, ``the answer is 42`` and
    ``\\boxed{42}`` in any case; the last one in the text wins because teams revise.
    """
    marked = [(m.start(), m.group(1)) for m in MARKER.finditer(text)]
    marked += [(m.start(), boxed_content(m.group(1))) for m in BOXED.finditer(text)]
    if marked:
        return clean_number(max(marked)[1])
    numbers = ANY_NUMBER.findall(text)
    return clean_number(numbers[-1]) if numbers else None


def boxed_content(content: str) -> str:
    """``\\frac{3}{4}`` becomes ``3/4``; anything else is kept as written."""
    content = re.sub(r"\\d?frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", content)
    return content.strip().strip("$").strip()


def clean_number(text: str) -> str:
    """Drop ``$``, commas inside numbers and a trailing period."""
    text = text.strip().replace("$", "")
    text = re.sub(r"(?<=\d),(?=\d)", "", text)
    return text.rstrip(".").strip()


def parse_number(text: str) -> Fraction | None:
    """An exact value for ``1,234``, ``$5``, ``5.0``, ``-3/4``; None if not a plain number.

    Scientific notation is refused on purpose: ``1e999999999`` would be slow to build.
    """
    text = clean_number(text).replace(" ", "")
    if len(text) > 100 or not PLAIN.fullmatch(text):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def numeric_reward(expected: str, got: str | None) -> float:
    """1.0 when both are numbers equal within a relative tolerance of 1e-6, else 0.0."""
    if got is None:
        return 0.0
    want, have = parse_number(expected), parse_number(got)
    if want is None or have is None:
        return 0.0
    if want == have or abs(want - have) <= Fraction(1, 10**6) * max(abs(want), abs(have)):
        return 1.0
    return 0.0


# -- generated tasks ----------------------------------------------------------------------

Range = tuple[int, int] | list[int]
Answer = Fraction | int
Template = tuple[str, dict[str, Range], Callable[..., Answer]]

SMALL = (1, 49)
TINY = (2, 19)


def template(text: str, ranges: dict[str, Range], answer: Callable[..., Answer]) -> Template:
    """A question with ``{name}`` slots, the range each slot is drawn from, and its answer.

    ``answer`` returns 0 (rejected, redrawn) for draws that make no sense midway.
    """
    return (text, ranges, answer)


LEVELS: dict[int, list[Template]] = {
    1: [
        template("What is {a} + {b}?", {"a": SMALL, "b": SMALL}, lambda a, b: a + b),
        template("What is {a} - {b}?", {"a": SMALL, "b": SMALL}, lambda a, b: a - b),
    ],
    2: [template("What is {a} * {b}?", {"a": TINY, "b": TINY}, lambda a, b: a * b)],
    3: [
        template("What is ({a} + {b}) * {c}?", {"a": SMALL, "b": SMALL, "c": (2, 12)}, lambda a, b, c: (a + b) * c),
        template("What is ({a} - {b}) * {c}?", {"a": SMALL, "b": SMALL, "c": (2, 12)}, lambda a, b, c: (a - b) * c),
        template("What is {a} * ({b} + {c})?", {"a": (2, 12), "b": SMALL, "c": SMALL}, lambda a, b, c: a * (b + c)),
        template("What is ({a} * {b}) - {c}?", {"a": TINY, "b": TINY, "c": SMALL}, lambda a, b, c: a * b - c),
        template(
            "What is ({a} + {b}) / {c}?", {"a": SMALL, "b": SMALL, "c": (2, 9)}, lambda a, b, c: Fraction(a + b, c)
        ),
    ],
    4: [
        template(
            "A shop sells {a} boxes of {b} apples and {c} loose apples; how many apples does it sell in total?",
            {"a": (3, 25), "b": (6, 24), "c": (2, 20)},
            lambda a, b, c: a * b + c,
        ),
        template(
            "A bus starts with {a} passengers, {b} get off at the first stop and {c} get "
            "on at the second; how many passengers are on the bus now?",
            {"a": (20, 60), "b": (5, 30), "c": (3, 25)},
            lambda a, b, c: a - b + c if b < a else 0,
        ),
        template(
            "A farmer plants {a} rows of {b} trees and {c} of them die; how many trees are still alive?",
            {"a": (4, 30), "b": (5, 25), "c": (2, 40)},
            lambda a, b, c: a * b - c,
        ),
        template(
            "Tom buys {a} notebooks at ${b} each and pays with a ${c} bill; how many dollars of change does he get?",
            {"a": (2, 9), "b": (2, 12), "c": [50, 100]},
            lambda a, b, c: c - a * b,
        ),
        template(
            "A teacher shares {a} pencils equally among {b} students and then gives each "
            "student {c} more; how many pencils does each student have?",
            {"a": (12, 144), "b": (2, 12), "c": (1, 9)},
            lambda a, b, c: Fraction(a, b) + c,
        ),
        template(
            "A baker bakes {a} trays of {b} cookies and packs them into bags of {c}; how many bags does he fill?",
            {"a": (2, 12), "b": (6, 24), "c": (2, 12)},
            lambda a, b, c: Fraction(a * b, c),
        ),
    ],
    5: [
        template(
            "A shop has {a} crates of {b} apples and sells {c} in the morning and {d} in "
            "the afternoon; how many apples are left?",
            {"a": (5, 30), "b": (12, 48), "c": (10, 90), "d": (10, 90)},
            lambda a, b, c, d: a * b - c - d,
        ),
        template(
            "Tom buys {a} notebooks at ${b} each and {c} pens at ${d} each; how many dollars does he spend?",
            {"a": (2, 15), "b": (2, 19), "c": (2, 15), "d": (1, 9)},
            lambda a, b, c, d: a * b + c * d,
        ),
        template(
            "A factory makes {a} toys an hour for {b} hours a day over {c} days and {d} "
            "of them are faulty; how many good toys does it make?",
            {"a": (5, 40), "b": (4, 12), "c": (2, 7), "d": (3, 99)},
            lambda a, b, c, d: a * b * c - d,
        ),
        template(
            "A school orders {a} boxes of {b} pencils, shares them equally among {c} "
            "classes and each class gives {d} to the office; how many pencils does each "
            "class keep?",
            {"a": (2, 24), "b": (6, 24), "c": (2, 8), "d": (1, 9)},
            lambda a, b, c, d: Fraction(a * b, c) - d,
        ),
        template(
            "A bus starts with {a} passengers, {b} get off at the first stop, {c} get on "
            "at the second and {d} get off at the third; how many passengers are on the "
            "bus now?",
            {"a": (20, 70), "b": (3, 25), "c": (3, 25), "d": (3, 25)},
            lambda a, b, c, d: a - b + c - d if b < a else 0,
        ),
    ],
}


def generate(n: int, *, seed: int = 0, prefix: str = "maths") -> list[Task]:
    """``n`` tasks cycling through levels 1..5, the same for the same seed.

    Uses its own ``random.Random`` so callers' and libraries' use of ``random`` can't
    change the pack.
    """
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        level = i % 5 + 1
        question, answer = sample(rng, rng.choice(LEVELS[level]))
        task_id = f"{prefix}-{i + 1:04d}"
        tasks.append(Task(id=task_id, question=question, answer=str(answer), level=level))
    return tasks


def sample(rng: random.Random, chosen: Template) -> tuple[str, int]:
    """Draw numbers until the answer is a positive integer (rejection sampling)."""
    text, ranges, answer = chosen
    for _ in range(10_000):
        values = {name: rng.choice(r) if isinstance(r, list) else rng.randint(*r) for name, r in ranges.items()}
        result = Fraction(answer(**values))
        if result > 0 and result.denominator == 1:
            return text.format(**values), int(result)
    raise RuntimeError(f"template never gave a positive integer: {text}")


def write_jsonl(tasks: list[Task], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for task in tasks:
            out.write(json.dumps(task.model_dump(), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    # python -m mas.domains.maths scenarios/maths: the training tasks and the held-out test tasks.
    if len(sys.argv) != 2:
        sys.exit("usage: python -m mas.domains.maths FOLDER")
    write_jsonl(generate(200, seed=0), Path(sys.argv[1]) / "tasks.jsonl")
    write_jsonl(generate(100, seed=1, prefix="maths-test"), Path(sys.argv[1]) / "test.jsonl")

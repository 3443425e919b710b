"""The planted lessons of the hard world (``bench/hard_world.py``), with their true effects.

Effects are in units: one unit is one logit with ``log_odds`` on, or 0.15 of the chance of
success with it off. Each lesson has its canonical text, two paraphrases in other words, a
negation (sharing most of the canonical text's words), and for most a short paraphrase that
drops the condition ("bare"), which shares many words with the lesson but, with ``twins`` on,
does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Lesson:
    key: str
    texts: tuple[str, ...]
    """The canonical text, then paraphrases (same condition, same action, other words)."""
    negation: str
    bare: str | None
    effect: dict[str, float] = field(default_factory=dict)
    """Per role, at the last epoch; for a lesson that varies by task, on the tasks with units."""
    elsewhere: dict[str, float] | None = None
    """Per role, on the tasks without units (``by_task``); None: the same on every task."""
    start: dict[str, float] | None = None
    """Per role, in the first epoch (``drift``); None: the same in every epoch."""
    needs: str | None = None
    """The key of a lesson the planner's prompt must show for this one to help (``interaction``)."""


LESSONS = [
    Lesson(
        "expression",
        (
            "When a task has several operations, write the whole expression with parentheses before computing.",
            "Before computing anything, set down the full expression, parentheses included, if the task combines operations.",
            "For multi-step arithmetic, first write out the complete expression with its brackets, then compute.",
        ),
        "When a task has several operations, compute each part in your head without writing the expression.",
        "Write the whole expression with parentheses before computing.",
        {"planner": 1.0, "solver": 1.0},
    ),
    Lesson(
        "estimate",
        (
            "When a result comes back, compare it with a rough estimate before passing it on.",
            "Check every returned result against a quick mental estimate before you hand it over.",
            "Before passing a result on, make sure it is close to a rough estimate of the answer.",
        ),
        "When a result comes back, pass it on at once without comparing it with any estimate.",
        "Compare it with a rough estimate before passing it on.",
        {"solver": 1.0, "verifier": 1.0},
    ),
    Lesson(
        "reread",
        (
            "When the question asks for a specific quantity, reread it before giving the final answer.",
            "Before the final answer, read the question again to confirm which quantity it asks for.",
            "Reread the question just before answering, to be sure of the quantity wanted.",
        ),
        "When the question asks for a specific quantity, answer without rereading it.",
        "Reread it before giving the final answer.",
        {"planner": 1.0, "verifier": 1.0},
    ),
    Lesson(
        "total",
        (
            "When the task mentions a total, name the parts that make it up before planning.",
            "List what a total consists of before you plan, whenever the task mentions one.",
            "If a total appears in the task, first spell out its parts, then plan.",
        ),
        "When the task mentions a total, plan at once without naming the parts that make it up.",
        "Name the parts that make it up before planning.",
        {"planner": 1.0, "solver": 1.0},
        start={},
    ),
    Lesson(
        "round",
        (
            "When a number has many digits, round it before using it.",
            "Round off long numbers before working with them.",
            "Before using a many-digit number, make it a round one.",
        ),
        "When a number has many digits, keep every digit and never round it.",
        "Round it before using it.",
        {"solver": -0.8, "verifier": -0.8},
        start={"solver": 1.0, "verifier": 1.0},
    ),
    Lesson(
        "plan",
        (
            "When the task has more than two steps, number the steps of the plan.",
            "Number each step of the plan whenever the task takes more than two steps.",
            "Write plans of three or more steps as a numbered list.",
        ),
        "When the task has more than two steps, write the plan as one paragraph without numbers.",
        "Number the steps of the plan.",
        {"planner": 0.6},
    ),
    Lesson(
        "order",
        (
            "When the plan numbers its steps, carry them out in the numbered order.",
            "Follow a numbered plan one step at a time, in its order.",
            "If the planner numbered the steps, do them in that sequence.",
        ),
        "When the plan numbers its steps, ignore the numbers and carry them out in any order.",
        "Carry them out in the numbered order.",
        {"solver": 1.0},
        needs="plan",
    ),
    Lesson(
        "calculator",
        (
            "When a product or a quotient has more than one digit on each side, use the calculator.",
            "Use the calculator for any product or quotient of multi-digit numbers.",
            "Multi-digit products and quotients go to the calculator, not to mental arithmetic.",
        ),
        "When a product or a quotient has more than one digit on each side, never use the calculator.",
        "Use the calculator.",
        {"solver": 0.8},
    ),
    Lesson(
        "reverse",
        (
            "When checking a result, redo the last operation in reverse.",
            "To check a result, undo the last operation and see whether you get back the input.",
            "Verify by running the final operation backwards.",
        ),
        "When checking a result, trust it without redoing any operation.",
        "Redo the last operation in reverse.",
        {"verifier": 0.8},
    ),
    Lesson(
        "units",
        (
            "Before computing, restate every number of the task with a unit of measure.",
            "Give each number a unit of measure before any computation.",
            "Attach a measuring unit to all the numbers before you compute.",
        ),
        "Before computing, never restate a number of the task with a unit of measure.",
        None,
        {"solver": 0.6, "verifier": 0.6},
        elsewhere={"solver": -1.5, "verifier": -1.5},
    ),
    Lesson(
        "aloud",
        (
            "When the numbers are small, say each one aloud before using it.",
            "Name each small number out loud before you use it.",
            "Say small numbers aloud before working with them.",
        ),
        "When the numbers are small, never say them aloud.",
        "Say each one aloud before using it.",
    ),
    Lesson(
        "color",
        (
            "When the plan is long, highlight its key words in your head.",
            "Mentally highlight the key words of a long plan.",
            "In a long plan, keep its key words highlighted in mind.",
        ),
        "When the plan is long, do not highlight anything.",
        None,
    ),
    Lesson(
        "guess",
        (
            "When a result is slow to compute, give the first number that comes to mind.",
            "If computing takes long, answer with whatever number comes to mind first.",
            "Answer with your first guess when a computation would take long.",
        ),
        "When a result is slow to compute, never guess a number.",
        None,
        {"planner": -0.7, "solver": -1.3, "verifier": -0.7},
    ),
    Lesson(
        "skip",
        (
            "When the solver sounds confident, skip the check.",
            "Skip checking when the result is stated with confidence.",
            "A confident result needs no check: skip it.",
        ),
        "When the solver sounds confident, still check the result.",
        None,
        {"verifier": -1.0},
    ),
]
HARMFUL = next(lesson for lesson in LESSONS if lesson.key == "guess")
"""Planted in the solver's library at the start: how many epochs until it leaves."""

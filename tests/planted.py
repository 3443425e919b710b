"""A planted-utility world for the promotion tests.

Each planted lesson helps (or hurts) a known set of roles. In a rollout every role applies
each planted lesson in its prompt with probability 1/2 and says so; the summarizer reports
what it applied, by id. The log-odds of
success move by the lesson's effect for each application, centred on the prompt (half the
effect is taken off for every lesson in a prompt, applied or not), so success stays near
1/2 however full the libraries get and the evidence never saturates. The learning calls
propose planted lessons to roles at random, helpful there or not, so only the evidence can
tell which lessons help several roles.
"""

from __future__ import annotations

import json
import math
import re

from mas.models.fake import Request
from mas.team.scenario import Scenario, load_role
from mas.types.tasks import Task

HELPS = {
    "Restate the numbers of the question before acting on them.": {"planner", "solver"},
    "Name the operation each step needs before computing it.": {"solver", "verifier"},
    "Check every intermediate result once more before going on.": {"planner", "solver", "verifier"},
    "Prefer the calculator over mental arithmetic for products.": {"solver"},
    "Write the plan as short numbered steps with one action each.": set(),
}
HARMFUL = "Always answer with the first number that comes to mind."
ROLES = ("planner", "solver", "verifier")
LESSON = re.compile(r"^- (.+)$", re.M)
CITED = re.compile(r"(applied|skipped) (\w+)")
SHOWN = re.compile(r"^  \[([\w-]+/\d{4})\] (\w+)", re.M)


def scenario(n: int = 40) -> Scenario:
    roles = [load_role(r) for r in ROLES]
    tasks = [Task(id=f"t{i:03d}", question=f"Report the number {i}.", answer=str(i)) for i in range(1, n + 1)]
    return Scenario("planted", roles, tasks, "numeric")


def effect(first_word: str, role: str) -> float:
    """Change in the log-odds of success when ``role`` applies the lesson."""
    if first_word == HARMFUL.split()[0]:
        return -1.5
    for text, roles in HELPS.items():
        if text.split()[0] == first_word:
            return 1.2 if role in roles else 0.0
    return 0.0


def respond(request: Request) -> str:
    if request.schema is not None:
        return json.dumps(_learning(request))
    role = re.search(r"You are the (\w+)", request.system).group(1)
    applied = [
        f"applied {text.split()[0]}" if request.unit(f"apply {role} {text}") < 0.5 else f"skipped {text.split()[0]}"
        for text in LESSON.findall(request.system)
    ]
    if role != "verifier":
        return "; ".join(applied) or "nothing to add"
    # The verifier closes the rollout: its success odds add up every role's applications.
    said = [*request.messages[1:], "; ".join(applied)]
    speakers = ["planner", "solver", "verifier"]
    logit = sum(
        effect(word, who) * (0.5 if verb.startswith("applied") else -0.5)
        for who, text in zip(speakers, said)
        for verb, word in CITED.findall(text)
    )
    chance = 1 / (1 + math.exp(-logit))
    number = re.search(r"\d+", request.messages[0]).group(0)
    answer = number if request.unit("outcome") < chance else "0"
    return "; ".join(applied) + f" ANSWER: {answer}"


def _learning(request: Request) -> dict:
    name = request.schema.__name__
    body = "\n".join(request.messages)
    if name == "Summary":
        roles = []
        for section in body.split("\n## ")[1:]:
            role = section.split("\n", 1)[0].strip()
            words = {w for verb, w in CITED.findall(section) if verb == "applied"}
            judged = [lesson_id for lesson_id, first in SHOWN.findall(section) if first in words]
            roles.append({"role": role, "steps": ["took its turn"], "applied": judged})
        return {"roles": roles, "outcome": "done"}
    if name == "Advantage":
        texts = [*HELPS]
        picks = [
            (ROLES[int(request.unit(f"r{i}") * 3)], texts[int(request.unit(f"t{i}") * len(texts))]) for i in range(2)
        ]
        ops = [{"op": "add", "library": r, "text": t, "reason": "planted"} for r, t in picks]
        return {"comparison": "planted", "deciding_roles": ["solver"], "operations": ops}
    if name == "EditBatch":
        return {"edits": [{"op": "add", "text": t} for t in re.findall(r"^- add: (.+?)(?: \(why: .*\))?$", body, re.M)]}
    raise ValueError(name)

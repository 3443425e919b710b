"""The multi-hop QA scenario: scoring answers, reading them off a transcript, generating tasks.

Stage: reward (generating tasks: none, before training).

Scoring follows the SQuAD/HotpotQA convention (normalized exact match and token F1, any alias
counts). Generated tasks are about an invented world, so no model can answer from memory: the
team has to search the task's passages and chain what it finds.

Run ``python -m mas.domains.qa FOLDER`` to write the training and held-out packs.
"""

from __future__ import annotations

import json
import random
import re
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mas.types.tasks import Passage, Task

# -- scoring ------------------------------------------------------------------------------

ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalize(text: str) -> str:
    """Lower-case, drop punctuation (any Unicode punctuation) and articles, collapse spaces."""
    text = "".join(c for c in text.lower() if not unicodedata.category(c).startswith("P"))
    return " ".join(ARTICLES.sub(" ", text).split())


def exact_match(got: str | None, answers: list[str]) -> float:
    """1.0 when ``got`` equals any answer after normalizing, else 0.0."""
    if not isinstance(got, str):
        return 0.0
    return float(any(normalize(got) == normalize(a) for a in answers))


def f1(got: str | None, answers: list[str]) -> float:
    """Token F1 against the best-matching answer; partial names earn partial credit."""
    if not isinstance(got, str):
        return 0.0
    tokens = normalize(got).split()
    return max((_token_f1(tokens, normalize(a).split()) for a in answers), default=0.0)


def _token_f1(got: list[str], want: list[str]) -> float:
    common = sum((Counter(got) & Counter(want)).values())
    if not common:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)


def qa_reward(task: Task, got: str | None) -> float:
    """Token F1 against the task's answer and its aliases (MuSiQue lists several)."""
    answers = [a for a in [task.answer, *task.aliases] if a]
    return f1(got, answers)


# -- reading the answer -------------------------------------------------------------------

MARKER = re.compile(r"(?:\bfinal\s+answer|\banswer)\s*\**\s*[:：]", re.IGNORECASE)
MAX_ANSWER = 100


def extract_answer(text: str) -> str | None:
    """The text after the last ``ANSWER:`` marker (to the end of its line), else the last
    non-empty line; the last marker wins because teams revise. None when nothing is there."""
    if not isinstance(text, str) or not text.strip():
        return None
    markers = list(MARKER.finditer(text))
    if markers:
        rest = text[markers[-1].end() :]
        line = rest.split("\n", 1)[0]
        if not line.strip("*_ \t\r"):  # "ANSWER:" alone on its line: the answer is below
            line = next((l for l in rest.splitlines() if l.strip()), "")
        return _clean(line) or None
    last = [l for l in text.splitlines() if l.strip()][-1]
    return _clean(last) or None


def _clean(line: str) -> str:
    """Drop markdown emphasis, quotes and a trailing period; cut to ``MAX_ANSWER`` chars."""
    line = line.strip().strip("*_`\"'“”‘’ \t").rstrip(".").strip().strip("*_`\"'“”‘’")
    return line[:MAX_ANSWER].strip()


# -- the invented world -------------------------------------------------------------------

SYLLABLES = (
    "ka ve lo ra tam qui or len bra nock mar ro wen sil dra fen tho mi zar vel ash bel cor "
    "dun fa gri hal jor kel lum mor nev pel rin sar tul vy wex yar zo bri cal dor ost ul"
).split()
OCCUPATIONS = "weaver surveyor glassblower ferryman archivist cartographer brewer clockmaker potter tanner".split()
SUFFIXES = "Mills Works Foundry Trading Press Shipping Textiles Ironworks Brewery Glassworks Ropeworks Lanterns".split()
PRODUCTS = "rope glass salt clocks paper wool cider lanterns bells maps".split()
SIGHTS = ["salt marshes", "stone bridge", "autumn fair", "clock tower", "ferry crossing", "cider orchards"]
HOPS = (2, 3, 4)
COUNTS = {"region": 4, "town": 12, "river": 4, "company": 10, "person": 30}


@dataclass(frozen=True)
class Relation:
    """One hop from a ``subject`` kind: ``phrase`` names the object inside a longer question,
    ``question`` asks for it as the last hop. A backward hop (town -> its only native) is the
    ``inverse_of`` a forward one and is stated in the object's passage."""

    subject: str
    phrase: str
    question: str
    inverse_of: str | None = None


RELATIONS = {
    "born_in": Relation("person", "the town where {x} was born", "In which town was {x} born?"),
    "employer": Relation("person", "the company that employs {x}", "Which company employs {x}?"),
    "region_of": Relation("town", "the region that contains {x}", "In which region is {x}?"),
    "river_of": Relation("town", "the river that flows through {x}", "Which river flows through {x}?"),
    "founder": Relation("company", "the founder of {x}", "Who founded {x}?"),
    "hq": Relation("company", "the town where {x} is based", "In which town is {x} based?"),
    "governor": Relation("region", "the governor of {x}", "Who governs {x}?"),
    "source": Relation("river", "the region where {x} rises", "In which region does {x} rise?"),
    "native": Relation("town", "the person born in {x}", "Who was born in {x}?", inverse_of="born_in"),
    "founded": Relation(
        "person", "the company founded by {x}", "Which company was founded by {x}?", inverse_of="founder"
    ),
}


@dataclass
class World:
    """Entities by name: their ``kind``, ``links`` (forward relation -> entity, each relation a
    function) and ``notes`` (facts no question asks about, passage filler)."""

    kind: dict[str, str] = field(default_factory=dict)
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: dict[str, dict[str, str]] = field(default_factory=dict)

    def step(self, name: str, relation: str) -> str | None:
        """Where one hop leads from ``name``; None when it leads nowhere or not to one entity."""
        rel = RELATIONS[relation]
        if self.kind[name] != rel.subject:
            return None
        if rel.inverse_of is None:
            return self.links[name].get(relation)
        found = [s for s, out in self.links.items() if out.get(rel.inverse_of) == name]
        return found[0] if len(found) == 1 else None


def build_world(rng: random.Random) -> World:
    """~60 entities whose relations make every hop in ``RELATIONS`` single-valued."""
    world, used = World(), set()
    names = {kind: [_word(rng, used) for _ in range(n)] for kind, n in COUNTS.items()}
    names["person"] = [f"{first} {_word(rng, used)}" for first in names["person"]]
    names["company"] = [f"{w} {s}" for w, s in zip(names["company"], rng.sample(SUFFIXES, COUNTS["company"]))]
    for kind, group in names.items():
        for name in group:
            world.kind[name], world.links[name], world.notes[name] = kind, {}, {}
    towns, regions, people = names["town"], names["region"], names["person"]
    for i, town in enumerate(towns):
        world.links[town]["region_of"] = regions[i % len(regions)]
        world.notes[town]["sight"] = rng.choice(SIGHTS)
    for i, town in enumerate(rng.sample(towns, 2 * len(names["river"]))):
        world.links[town]["river_of"] = names["river"][i // 2]
    for river in names["river"]:
        world.links[river]["source"] = rng.choice(regions)
    half = len(towns) // 2  # the first half get exactly one native, so "the person born in" works
    for i, person in enumerate(people):
        world.links[person]["born_in"] = towns[i] if i < half else towns[half + i % (len(towns) - half)]
        world.links[person]["employer"] = rng.choice(names["company"])
        world.notes[person] |= {"job": rng.choice(OCCUPATIONS), "year": str(rng.randint(1890, 1990))}
    for company, founder in zip(names["company"], rng.sample(people, COUNTS["company"])):
        world.links[company] |= {"founder": founder, "hq": rng.choice(towns)}
        world.notes[company] |= {"product": rng.choice(PRODUCTS), "year": str(rng.randint(1800, 1990))}
    for region, governor in zip(regions, rng.sample(people, len(regions))):
        world.links[region]["governor"] = governor
    return world


def _word(rng: random.Random, used: set[str]) -> str:
    """A fresh invented word; no two entities share a word, so wrong names score 0 F1."""
    while True:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 2, 3)))).capitalize()
        if len(word) >= 4 and word not in used:
            used.add(word)
            return word


def mention(world: World, name: str) -> str:
    return f"the {name}" if world.kind[name] == "river" else name


def passage(world: World, name: str) -> Passage:
    """The entity's encyclopedia entry: each of its relations stated once, plus filler."""
    out, note, kind = world.links[name], world.notes[name], world.kind[name]
    inbound = lambda rel: [s for s, o in world.links.items() if o.get(rel) == name]  # noqa: E731
    if kind == "person":
        text = (
            f"{name} is {_a(note['job'])} born in {out['born_in']} in {note['year']}. "
            f"{name} works for {out['employer']}."
        )
    elif kind == "town":
        river = f" The {out['river_of']} flows through {name}." if "river_of" in out else ""
        text = f"{name} is a town in {out['region_of']}.{river} {name} is known for its {note['sight']}."
    elif kind == "region":
        text = f"{name} is a region governed by {out['governor']}. Its towns include {_listed(inbound('region_of'))}."
    elif kind == "company":
        text = (
            f"{name} is a company founded by {out['founder']} in {note['year']}. "
            f"It is based in {out['hq']} and makes {note['product']}."
        )
    else:
        text = f"The {name} is a river that rises in {out['source']}. It flows through {_listed(inbound('river_of'))}."
    return Passage(title=name, text=text)


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# -- questions ----------------------------------------------------------------------------


def chains(world: World, hops: int) -> list[tuple[list[str], list[str]]]:
    """Every walk of ``hops`` single-valued steps through distinct entities: (entities,
    relations). Single-valued steps make each walk's end the one right answer."""
    walks = [([name], []) for name in sorted(world.kind)]
    for _ in range(hops):
        walks = [
            ([*entities, entity], [*relations, relation])
            for entities, relations in walks
            for relation in RELATIONS
            if (entity := world.step(entities[-1], relation)) is not None and entity not in entities
        ]
    return walks


def question(world: World, entities: list[str], relations: list[str]) -> str:
    x = mention(world, entities[0])
    for relation in relations[:-1]:
        x = RELATIONS[relation].phrase.format(x=x)
    text = RELATIONS[relations[-1]].question.format(x=x)
    return text[0].upper() + text[1:]


def gold(entities: list[str], relations: list[str]) -> list[str]:
    """Whose passage states each hop: the subject's, or the object's for a backward hop."""
    holders = [b if RELATIONS[r].inverse_of else a for a, b, r in zip(entities, entities[1:], relations)]
    return list(dict.fromkeys(holders))


def generate(n: int, *, seed: int = 0, prefix: str = "multihop") -> list[Task]:
    """``n`` tasks cycling through 2, 3 and 4 hops, the same for the same seed.

    Walks are drawn by their last relation first, so "who governs ..." (where most walks end)
    doesn't crowd out the rest. Each task carries its gold passages and distractors, 8-10 in all.
    """
    rng = random.Random(seed)
    world = build_world(rng)
    pools = {hops: _by_last_relation(chains(world, hops)) for hops in HOPS}
    everyone = sorted(world.kind)
    tasks = []
    for i in range(n):
        hops = HOPS[i % len(HOPS)]
        left = sorted(r for r, walks in pools[hops].items() if walks)
        if not left:
            raise ValueError(f"the world has only {i} distinct questions for {n} tasks")
        pool = pools[hops][rng.choice(left)]
        entities, relations = pool.pop(rng.randrange(len(pool)))
        titles = gold(entities, relations)
        titles += rng.sample([e for e in everyone if e not in titles], rng.randint(8, 10) - len(titles))
        rng.shuffle(titles)
        tasks.append(
            Task(
                id=f"{prefix}-{i + 1:04d}",
                question=question(world, entities, relations),
                answer=entities[-1],
                level=hops,
                passages=[passage(world, t) for t in titles],
            )
        )
    return tasks


def _by_last_relation(walks: list) -> dict[str, list]:
    pools: dict[str, list] = {}
    for walk in walks:
        pools.setdefault(walk[1][-1], []).append(walk)
    return pools


def write_jsonl(tasks: list[Task], path: Path) -> None:
    """One task a line, in the field names ``mas.datasets.load_jsonl`` reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for task in tasks:
            record = task.model_dump(mode="json", exclude_defaults=True)
            if "aliases" in record:
                record["answer_aliases"] = record.pop("aliases")
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    # python -m mas.domains.qa scenarios/multihop: the training tasks and the held-out test tasks.
    if len(sys.argv) != 2:
        sys.exit("usage: python -m mas.domains.qa FOLDER")
    write_jsonl(generate(200, seed=0), Path(sys.argv[1]) / "tasks.jsonl")
    write_jsonl(generate(100, seed=1, prefix="multihop-test"), Path(sys.argv[1]) / "test.jsonl")

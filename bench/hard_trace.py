"""Where the hard world's share and harm go: what ``learning_world.py --hard`` reports, traced.

One run of mas per seed in the hard world (``bench/hard_world.py``, every feature on, one judge),
at default settings, then three tables (four with ``--make-room``):

- each (role, lesson) of the world's best library missing from the final libraries, by what
  happened to it (it was in that role's library and left; it was written only for other roles;
  it was never written), and the share of the achievable gain with each kind given back;
- the harmful lessons left at the end (removing one raises the team's chance by more than
  ``hard_world.HARM``), by kind, with what removing them gives back and how many were too young
  to be judged;
- the final private lessons tried on 20 tasks or more, by their estimate in their own role:
  the share of them that help, do nothing and harm in the final libraries;
- with ``--make-room`` (``PromotionPolicy.make_room`` on): the lessons a full library gave up
  for an add, by what they are worth in their role at the run's end.

No goal: it says where issue 30's goals (share >= 0.8, no harmful lesson left) are lost
(bench/README.md, "What the hard world's share and harm are made of now").

    .venv/bin/python bench/hard_trace.py                            # judge never, 48 seeds: about 4 minutes on 2 cores
    .venv/bin/python bench/hard_trace.py --judge action --seeds 12
    .venv/bin/python bench/hard_trace.py --make-room
    .venv/bin/python bench/hard_trace.py --draw 1     # the same worlds, mas's run seed drawn anew
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import learning_world as lw
from hard_world import HARD, HARM, JUDGES, LESSONS_BY_KEY

from mas.config import PromotionPolicy, TrainConfig
from mas.library import hierarchy
from mas.library.logs import SideFiles
from mas.types.lessons import GLOBAL

KINDS = ("was in the role, left", "written only for other roles", "never written")
BINS = (0.03, 0.06, 0.09, 0.12)
"""Edges of the estimate bins of the last table (the first and the last are open)."""


def trace(seed: int, judge: str, make_room: bool = False, draw: int = 0) -> dict:
    """One seed: the share, each missing pair's kind, the share with each kind given back, the
    harmful lessons left, the final private lessons' estimates beside their worth, and what
    each lesson given up to make room is worth in its role. ``draw``: mas's run seed is
    ``seed + 1000 * draw`` on the same world (``learning_world``'s draws)."""
    promotion = PromotionPolicy(make_room=make_room)
    config = TrainConfig(epochs=3, seed=seed + 1000 * draw, group_size=5, promotion=promotion)
    with tempfile.TemporaryDirectory(prefix="trace-") as folder:
        world, store, held, _ = lw.train_hard(Path(folder), seed, replace(HARD, judge=judge), 40, config)
        heads = store.heads()
        shared = [l.text for l in heads[GLOBAL].lessons] if GLOBAL in heads else []
        final = {r: [l.text for l in heads[r].lessons] if r in heads else [] for r in lw.ROLES}

        def show(role: str, question: str, extra: dict | None = None, gone: tuple = ((), "")) -> list[str]:
            """What the role's prompt shows at inference (``learning_world``'s measure), with
            ``extra`` lessons added and the lesson ``gone`` (its roles, its text) taken out."""
            shown = [l.text for l in lw._lessons(heads, role, question)] + (extra or {}).get(role, [])
            return [t for t in shown if not (role in gone[0] and t == gone[1])]

        ever = {
            name: {world.key(l.text) for v in store.versions(name) for l in v.lessons} for name in store.libraries()
        }
        missing = []  # (role, canonical text, kind)
        for role, texts in world.best_library(held).items():
            have = {world.key(t) for t in final[role] + shared}
            for text in texts:
                key = world.key(text)
                if key in have:
                    continue
                if key in ever.get(role, ()):
                    kind = KINDS[0]
                elif any(key in ever.get(other, ()) for other in lw.ROLES if other != role):
                    kind = KINDS[1]
                else:
                    kind = KINDS[2]
                missing.append((role, text, kind))
        empty, best = world.true_success({}, held), world.best(held)

        def share(extra: dict[str, list[str]]) -> float:
            now = world.true_success(lambda r, q: show(r, q, extra), held)
            return (now - empty) / max(best - empty, 1e-9)

        given = {
            kind: share({r: [t for role, t, k in missing if role == r and k == kind] for r in lw.ROLES})
            for kind in KINDS
        }
        now = world.true_success(show, held)
        effects = hierarchy.effects(store, PromotionPolicy())
        harmful, estimates = [], []
        for version in heads.values():
            roles = list(lw.ROLES) if version.library == GLOBAL else [version.library]
            for lesson in version.lessons:
                gone = (roles, lesson.text)
                worth = now - world.true_success(lambda r, q, gone=gone: show(r, q, gone=gone), held)
                own = effects.get((version.library, lesson.id)) if version.library != GLOBAL else None
                if worth < -HARM:
                    young = own.tasks < PromotionPolicy().min_tasks if own else version.library != GLOBAL
                    harmful.append((world.key(lesson.text).replace("~bare", ""), -worth, young))
                if own is not None and own.tasks >= 20:
                    estimates.append((own.effect, worth))
        rooms = [
            _worth(world, move.lessons[0].partition("/")[0], world.key(move.text))
            for _, moves in SideFiles(store.path).prunings.steps()
            for move in moves
            if move.reason.startswith("made room")
        ]
        return {
            "share": share({}),
            "missing": [kind for *_, kind in missing],
            "given": given,
            "harmful": harmful,
            "estimates": estimates,
            "rooms": rooms,
        }


def _worth(world, role: str, key: str) -> str:
    """Whether the planted lesson ``key`` helps, harms or does nothing in ``role`` on average
    over the tasks at the run's end (the lesson it needs in the planner given)."""
    needs = (LESSONS_BY_KEY[key.partition("~")[0]].needs or "",) if key != "?" else ()
    total = sum(world.effect(key, role, units=units, planner=needs) for units in (False, True))
    return "help" if total > 0 else "harm" if total < 0 else "nothing"


def report(judge: str, runs: list[dict]) -> None:
    print(f"hard world, judge {judge}, {len(runs)} seeds: share {statistics.fmean(r['share'] for r in runs):.3f}")
    counts = Counter(kind for r in runs for kind in r["missing"])
    print(f"\n  {'given back':34} {'pairs':>6} {'share':>6}")
    for kind in KINDS:
        print(f"  {kind:34} {counts[kind]:6d} {statistics.fmean(r['given'][kind] for r in runs):6.3f}")
    kinds: dict[str, list[float]] = defaultdict(list)
    young = 0
    for r in runs:
        for key, cost, is_young in r["harmful"]:
            kinds[key if "~not" not in key else "a negation"].append(cost)
            young += is_young
    left = sum(bool(r["harmful"]) for r in runs)
    total = sum(len(v) for v in kinds.values())
    print(f"\n  harmful lessons left: {total} in {left} of {len(runs)} seeds, {young} of them too young to be judged")
    for key, costs in sorted(kinds.items(), key=lambda item: -len(item[1])):
        print(f"  {key:34} {len(costs):3d}  removing one gives back {min(costs):.3f}-{max(costs):.3f}")
    print(f"\n  {'estimate (20+ tasks)':22} {'lessons':>8} {'help':>6} {'nothing':>8} {'harm':>6}")
    edges = (-math.inf, *BINS, math.inf)
    for low, high in zip(edges, edges[1:]):
        worth = [w for r in runs for e, w in r["estimates"] if low <= e < high]
        if worth:
            label = (
                f"below {high:.2f}"
                if low == -math.inf
                else f"{low:.2f} and above"
                if high == math.inf
                else f"{low:.2f}-{high:.2f}"
            )
            n = len(worth)
            help_, harm = sum(w > HARM for w in worth) / n, sum(w < -HARM for w in worth) / n
            print(f"  {label:22} {n:8d} {help_:6.2f} {1 - help_ - harm:8.2f} {harm:6.2f}")
    rooms = Counter(worth for r in runs for worth in r["rooms"])
    if rooms:
        n = sum(rooms.values())
        print(f"\n  given up to make room: {n} lessons; in their role at the end they")
        for worth in ("help", "nothing", "harm"):
            print(f"  {worth:22} {rooms[worth]:8d} {rooms[worth] / n:6.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judge", choices=JUDGES, default="never")
    parser.add_argument("--seeds", type=int, default=48, help="seeds 0 to N-1")
    parser.add_argument("--workers", type=int, default=lw.CORES)
    parser.add_argument(
        "--make-room",
        action="store_true",
        help="a full library gives up a lesson below zero for an add (off by default)",
    )
    parser.add_argument("--draw", type=int, default=0, help="mas's run seed is seed + 1000 x DRAW (0: the seed)")
    args = parser.parse_args()
    n = args.seeds
    with ProcessPoolExecutor(args.workers) as pool:
        runs = list(pool.map(trace, range(n), [args.judge] * n, [args.make_room] * n, [args.draw] * n))
    report(args.judge + (", make room" if args.make_room else "") + (f", draw {args.draw}" if args.draw else ""), runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reports: one or more run directories (training runs or studies) to a Markdown report with
PNG plots. A study renders as a training run does (``mas.studies.study_report``); the plots are
of the training runs (an ablation's variants among them).

Stage: none: evaluation and studies, after training (``mas report``).

Reads only what a run leaves behind (``run.json``, ``journal.jsonl``, the library file and
its promotions log) and never changes it. A run's history comes from its own library versions
and the versions it started from (recorded in ``run.json``), so lessons that later runs added
never show in it. Every input is read and checked before anything
is written, so a bad directory leaves the output directory untouched. Each output file is
written atomically and redacted (``mas.redact``), and none may replace a file a run reads.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from mas.errors import UserError
from mas.journal import CorruptJournal, read_back
from mas.library.budget import tokens
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.paths import atomic_write
from mas.redact import redact
from mas.runs import KINDS, kind_of
from mas.studies import study_report
from mas.studies.study_report import Study
from mas.types.evidence import PromotionMove
from mas.types.lessons import GLOBAL, Version
from mas.types.reports import StepReport
from mas.types.rollouts import Rollout

HEADING = "# Training report"
"""The title of a report with a training run in it (an ablation's variants are)."""
STUDY_HEADING = "# Study report"
"""The title of a report of studies alone: no training run, so no training to report."""
HEADINGS = (HEADING, STUDY_HEADING)
"""Every title mas gives a report: the first line by which ``_ours`` knows one it may replace."""
PLOTS = {
    "reward": "Mean reward per epoch",
    "library": "Library size per role",
    "tool_calls": "Tool calls per role",
    "promotions": "Promotion timeline",
}  # PNG name: title


@dataclass
class Run:
    """One training run as read from disk; ``libraries`` is None when its file is unreadable."""

    path: Path
    label: str
    settings: dict
    steps: list[StepReport]
    rollouts: list[tuple[int, Rollout]]  # each journaled rollout with its epoch
    libraries: dict[str, list[Version]] | None
    library_note: str
    moves: list[tuple[int, PromotionMove]]  # this run's entries of the promotions log, with their epoch

    @property
    def epochs(self) -> list[int]:
        return sorted({s.epoch for s in self.steps})


def write_report(run_dirs: list[Path], out_dir: Path) -> Path:
    """Write ``report.md`` and its PNG plots for ``run_dirs`` into ``out_dir``; return the report."""
    if not run_dirs:
        raise UserError("report: name at least one run directory")
    runs = [r for d in run_dirs for r in _load_all(Path(d))]
    labels = [r.label for r in runs]
    for i, run in enumerate(runs):
        if labels.count(run.label) > 1:
            run.label = f"{run.label} ({i + 1})"
    _check_output(out_dir, runs)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{out_dir}: cannot make the report folder ({e.strerror or e})") from None
    trained = [r for r in runs if isinstance(r, Run)]
    for name, draw in zip(PLOTS, (_plot_reward, _plot_library, _plot_tools, _plot_promotions)):
        if trained:  # a study alone has no epochs to plot
            png = io.BytesIO()
            draw(trained).savefig(png, format="png", dpi=110)
            atomic_write(out_dir / f"{name}.png", png.getvalue())
    path = out_dir / "report.md"
    atomic_write(path, redact(_markdown(runs)))
    return path


def _load_all(path: Path) -> list[Run | Study]:
    """The run in ``path``: a training run, or a study (an ablation with its variants' runs)."""
    settings_path = path / "run.json"
    if not settings_path.is_file() or not (path / "journal.jsonl").is_file():
        raise UserError(f"{path}: not a training run or study (no run.json or journal.jsonl)")
    try:
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
        kind = kind_of(settings) if isinstance(settings, dict) else None
    except (ValueError, OSError, RecursionError):
        kind = None
    if kind == "train":
        return [_load(path)]
    if kind not in KINDS:
        raise UserError(f"{path}: not a readable training run or study (bad run.json)")
    study = study_report.load(path, settings)
    variants = [_load(p) for p in study_report.variant_runs(study)]
    for run in variants:  # an ablation's variant: its folder's name
        run.label = f"{path.name}/{run.path.parent.name}"
    return [study, *variants]


def _check_output(out_dir: Path, runs: list[Run]) -> None:
    """The report goes into a folder, and replaces no file of a run or of its library."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir}: not a folder (--output names the report folder)")
    theirs = {p.resolve() for r in runs for p in (r.path / "run.json", r.path / "journal.jsonl")}
    theirs |= {p.resolve() for r in runs if isinstance(r, Run) for p in SideFiles(Path(r.settings["library"])).owned()}
    for name in [*(f"{n}.png" for n in PLOTS), "report.md"]:
        if (out_dir / name).resolve() in theirs:
            raise UserError(f"{out_dir / name}: a file of a run or of its library; choose another --output")
    report = out_dir / "report.md"
    if report.exists() and not _ours(report):
        raise UserError(f"{report}: not a report mas wrote; choose another --output or remove it")
    if not report.exists():
        for name in (f"{n}.png" for n in PLOTS):
            if (out_dir / name).exists():
                raise UserError(f"{out_dir / name}: not a plot of a report mas wrote; choose another --output")


def _ours(report: Path) -> bool:
    """Whether ``report`` is a report mas wrote (its first line), which a new one may replace."""
    if not report.is_file():
        return False
    try:
        with report.open("rb") as f:
            return f.readline(64).rstrip() in {h.encode() for h in HEADINGS}
    except OSError:
        return False


def _load(path: Path) -> Run:
    """Read one run directory, or raise UserError naming it (and a bad journal line)."""
    settings_path, journal_path = path / "run.json", path / "journal.jsonl"
    if not settings_path.is_file() or not journal_path.is_file():
        raise UserError(f"{path}: not a training run (no run.json or journal.jsonl)")
    try:
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
        library, config = Path(settings["library"]), dict(settings["config"])
    except (ValueError, KeyError, TypeError, OSError, RecursionError):
        raise UserError(f"{path}: not a readable training run (bad run.json)") from None
    steps, rollouts = _journal(journal_path)
    libraries, note = None, f"library file {library} is missing"
    if library.is_file():
        try:
            store = LibraryStore(library)
            libraries, note = {n: store.versions(n) for n in store.libraries()}, ""
        except UserError as e:
            note = str(e)
    try:
        log = SideFiles(library).promotions.steps()
        moves = [(key.epoch, m) for key, items in log if key.run == path.name for m in items]
    except (ValueError, KeyError, TypeError, ValidationError, UserError):
        moves = []  # a damaged log: the report goes on without it
    return Run(path, path.name, {**settings, "config": config}, steps, rollouts, libraries, note, moves)


def _journal(path: Path) -> tuple[list[StepReport], list[tuple[int, Rollout]]]:
    """A run's step reports, in order, and its rollouts with their epochs. Each record is
    checked as a resumed run checks it (``read_back``), so a bad one is named by its line; of
    two records with one key the last counts, as it does for a resumed run."""
    found: dict[tuple[str, str], object] = {}
    for kind, key, record, line in read_back(path, {"step": StepReport, "rollout": Rollout}):
        found[kind, key] = record if kind == "step" else (_epoch(path, key, line), record)
    steps = sorted((s for (kind, _), s in found.items() if kind == "step"), key=lambda s: (s.epoch, s.step))
    return steps, [r for (kind, _), r in found.items() if kind == "rollout"]


def _epoch(path: Path, key: str, line: int) -> int:
    """The epoch of a training rollout, from its key ``e<epoch>/s<step>/<task id>/<index>``."""
    found = re.match(r"e([0-9]{1,9})/", key)
    if found is None:
        raise CorruptJournal(f"{path}:{line}: not a training run's rollout (its key {key!r} names no epoch)")
    return int(found[1])


def _reward(run: Run, epoch: int) -> float:
    """Mean reward of an epoch: the step means weighted by their groups."""
    steps = [s for s in run.steps if s.epoch == epoch]
    groups = sum(s.groups for s in steps)
    return sum(s.mean_reward * s.groups for s in steps) / groups if groups else 0.0


def _roles(run: Run) -> list[str]:
    """Libraries to show: the shared one, the team's roles, then any other library the run
    started from or changed."""
    names = list(dict.fromkeys([GLOBAL] + [t.role for _, r in run.rollouts for t in r.traces]))
    last = run.epochs[-1] if run.epochs else -1
    return names + sorted(n for n in set(run.libraries or {}) - set(names) if _state(run, n, last) is not None)


def _state(run: Run, library: str, epoch: int) -> Version | None:
    """The library at the end of ``epoch`` of this run (-1: when the run started): the run's
    own latest version by then, else the version it started from. What other runs or commands
    did to the library later never shows. None: the library did not exist for this run."""
    own = [
        v
        for v in (run.libraries or {}).get(library, [])
        if v.provenance is not None and v.provenance.run == run.path.name and v.provenance.epoch <= epoch
    ]
    return max(own, key=lambda v: v.number) if own else _start(run, library)


def _start(run: Run, library: str) -> Version | None:
    """The version of ``library`` the run started from, as its ``run.json`` records it. A run
    from before that record starts from the version before its own first one."""
    versions = {v.number: v for v in (run.libraries or {}).get(library, [])}
    start = run.settings.get("start")
    if isinstance(start, dict):
        number = start.get(library)
    else:
        own = [n for n, v in versions.items() if v.provenance is not None and v.provenance.run == run.path.name]
        number = min(own) - 1 if own else None
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    return Version.empty(library) if number == 0 else versions.get(number)


def _size(version: Version | None) -> tuple[int, int]:
    """Lessons and tokens of a library version (counted as its budget was)."""
    lessons = version.lessons if version else []
    budget = version.provenance.budget if version and version.provenance else None
    spec = budget.tokenizer if budget else "words"
    return len(lessons), sum(tokens(lesson.text, spec) for lesson in lessons)


def _tool_calls(run: Run, epoch: int, role: str) -> float:
    """Tool calls ``role`` made per rollout in ``epoch``."""
    rollouts = [r for e, r in run.rollouts if e == epoch]
    calls = sum(len(t.tool_calls) for r in rollouts for tr in r.traces if tr.role == role for t in tr.turns)
    return calls / len(rollouts) if rollouts else 0.0


def _totals(steps: list[StepReport]) -> tuple[int, int, int, float]:
    """Model calls, tokens, failures and seconds of some steps."""
    counts = [c for s in steps for c in s.calls.values()]
    return (
        sum(c.calls for c in counts),
        sum(c.prompt_tokens + c.completion_tokens for c in counts),
        sum(c.failures for c in counts),
        sum(s.seconds for s in steps),
    )


def _figure(rows: int = 1, cols: int = 1, height: float = 4.0, width: float = 6.5):
    """A figure drawn by the Agg backend (no display, no pyplot state), and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False)


def _epoch_axis(ax, title: str, ylabel: str, epochs: list[int], integer: bool = False) -> None:
    """Title, labels, one tick per epoch, a grid, and a legend when there are several series."""
    from matplotlib.ticker import MaxNLocator

    ax.set(title=title, xlabel="epoch", ylabel=ylabel)
    ax.set_xticks(epochs or [0], ["start" if e < 0 else str(e) for e in epochs or [0]])
    ax.grid(alpha=0.3)
    if integer:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if ax.get_legend() is None and len(ax.get_legend_handles_labels()[0]) > 1:
        ax.legend(fontsize="small")


def _plot_reward(runs: list[Run]):
    fig, ((ax,),) = _figure()
    for run in runs:
        ax.plot(run.epochs, [_reward(run, e) for e in run.epochs], marker="o", label=run.label)
    ax.set_ylim(-0.02, 1.02)
    _epoch_axis(ax, "Mean training reward per epoch", "mean reward", sorted({e for r in runs for e in r.epochs}))
    return fig


def _plot_library(runs: list[Run]):
    """Lessons and tokens per library at the end of each epoch, one row per run; the series
    are nudged sideways so that equal values stay visible."""
    fig, axes = _figure(len(runs), 2, height=3.6)
    for run, (left, right) in zip(runs, axes):
        epochs, roles = [-1, *run.epochs], _roles(run)
        for k, role in enumerate(roles):
            sizes = [_size(_state(run, role, e)) for e in epochs]
            x = [e + 0.04 * (k - (len(roles) - 1) / 2) for e in epochs]
            style = {"marker": "osD^vP*X"[k % 8], "linestyle": ["-", "--", ":", "-."][k % 4], "label": role}
            left.plot(x, [s[0] for s in sizes], **style)
            right.plot(x, [s[1] for s in sizes], **style)
        for ax in (left, right):  # from zero, and a sensible scale when everything is zero
            top = max(ax.get_ylim()[1], 1)
            ax.set_ylim(-0.05 * top, top)
        missing = "" if run.libraries is not None else " (no library file)"
        _epoch_axis(left, f"{run.label}: lessons per library{missing}", "lessons", epochs, integer=True)
        _epoch_axis(right, f"{run.label}: tokens per library{missing}", "tokens", epochs, integer=True)
    return fig


def _plot_tools(runs: list[Run]):
    """Tool calls per rollout: bars of the roles side by side per epoch, one panel per run."""
    fig, axes = _figure(len(runs), 1, height=3.4, width=7.5)
    for run, (ax,) in zip(runs, axes):
        roles, top = _roles(run)[1:], 0.0
        width = 0.8 / max(len(roles), 1)
        for k, role in enumerate(roles):
            values = [_tool_calls(run, e, role) for e in run.epochs]
            bars = ax.bar([e + width * (k - (len(roles) - 1) / 2) for e in run.epochs], values, width, label=role)
            ax.bar_label(bars, fmt="%.2g", fontsize=7)
            top = max([top, *values])
        ax.set_ylim(0, 1.25 * top if top else 1)
        if len(roles) > 1:
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
        _epoch_axis(ax, f"{run.label}: tool calls per role", "tool calls per rollout", run.epochs)
    return fig


def _plot_promotions(runs: list[Run]):
    """One row per promotion or demotion, at its epoch, with its lesson text; runs stacked."""
    from matplotlib.lines import Line2D

    fig, ((ax,),) = _figure(height=1.6 + 0.32 * sum(max(len(r.moves), 1) for r in runs), width=9)
    epochs, y, ticks = sorted({e for r in runs for e in r.epochs}) or [0], 0, []
    for run in runs:
        ticks.append(y)
        if not run.moves:
            ax.text(epochs[0], y, "no promotions or demotions", color="gray", va="center", fontsize=8)
        for epoch, m in sorted(run.moves, key=lambda em: em[0]):
            up = m.kind == "promote"
            ax.plot(epoch, y, "^" if up else "v", color="tab:green" if up else "tab:red")
            ax.annotate(
                _abbrev(m.text, 60), (epoch, y), xytext=(8, 0), textcoords="offset points", va="center", fontsize=8
            )
            y += 1
        y += 0 if run.moves else 1
        ax.axhline(y - 0.5, color="lightgray", linewidth=0.8)
    ax.set_yticks(ticks, [r.label for r in runs])
    ax.set(ylim=(y - 0.5, -0.7), xlim=(epochs[0] - 0.3, epochs[-1] + 2.2))
    markers = [Line2D([], [], marker=m, color=c, linestyle="") for m, c in (("^", "tab:green"), ("v", "tab:red"))]
    ax.legend(markers, ["promotion", "demotion"], fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    _epoch_axis(ax, "Promotions to and demotions from the global library", "run", epochs)
    return fig


def _abbrev(text: str, width: int) -> str:
    text = " ".join(redact(str(text)).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _heading(everything: list[Run | Study]) -> str:
    """The report's title, by what it holds: a report of studies alone is no training report."""
    return HEADING if any(isinstance(r, Run) for r in everything) else STUDY_HEADING


def _markdown(everything: list[Run | Study]) -> str:
    parts = [_heading(everything), "", "Runs: " + ", ".join(f"`{r.label}`" for r in everything), ""]
    runs = [r for r in everything if isinstance(r, Run)]
    if len(runs) > 1:
        header = [
            "run",
            "scenario",
            "model",
            "final-epoch reward",
            "lessons",
            "model calls",
            "total tokens",
            "wall seconds",
        ]
        parts += ["## Comparison", "", *_table(header, [_comparison(r) for r in runs]), ""]
    parts += ["## Plots", ""] + [f"### {title}\n\n![{title}]({name}.png)\n" for name, title in PLOTS.items() if runs]
    parts += [] if runs else ["_No training runs: nothing to plot._", ""]
    sections = [_run_section(r) if isinstance(r, Run) else study_report.section(r, _table) for r in everything]
    return "\n".join(parts + [line for section in sections for line in section])


def _run_section(run: Run) -> list[str]:
    """A run's settings, its numbers per epoch, its promotions and its lessons at its end (its
    own library versions, not the library as it is now)."""
    s, c = run.settings, run.settings["config"]
    out = [
        f"## Run `{run.label}`",
        "",
        f"Directory `{run.path}`, library `{s['library']}`",
        "",
        f"scenario **{s.get('scenario')}**, model **{s.get('model') or '(unnamed)'}**, epochs {c.get('epochs')}, "
        f"group size {c.get('group_size')}, batch size {c.get('batch_size')}",
        "",
    ]
    header = [
        "epoch",
        "reward",
        "informative groups",
        "edits applied",
        "retired",
        "promoted / demoted",
        "model calls",
        "tokens",
        "failures",
        "seconds",
    ]
    out += _table(header, [_epoch_row(run, e) for e in run.epochs]) if run.steps else ["_No finished steps._"]
    out += ["", "### Refused and failed, per step", ""]
    kinds = [[str(s.epoch), str(s.step), *study_report.by_kind(s)] for s in run.steps]
    out += _table(["epoch", "step", "refused", "failed"], kinds) if kinds else ["_None._"]
    out += ["", "### Promotions and demotions", ""]
    out += [
        f"- epoch {epoch}: {m.kind} “{_abbrev(m.text, 100)}” (roles: {', '.join(m.roles) or 'none'})"
        + (f": {_abbrev(m.reason, 240)}" if m.reason and m.kind != "promote" else "")  # a promotion's names its roles
        for epoch, m in run.moves
    ] or ["_None._"]
    out += ["", "### Lessons at the end of the run", ""]
    if run.libraries is None:
        return out + [f"_No lessons to show: {run.library_note}._", ""]
    last = run.epochs[-1] if run.epochs else -1
    for name in _roles(run):
        end, start = _state(run, name, last), _start(run, name)
        lessons = end.lessons if end else []
        began = f"v{start.number} at the start, {_lessons(start.lessons)}" if start else "none at the start"
        out += [f"**{name}** v{end.number if end else 0} ({_lessons(lessons)}; {began})", ""]
        out += [f"- `{x.id}` {' '.join(x.text.split())}" for x in lessons] or ["_(no lessons)_"]
        out.append("")
    return out


def _lessons(lessons: list) -> str:
    return f"{len(lessons)} lesson{'s' * (len(lessons) != 1)}"


def _epoch_row(run: Run, epoch: int) -> list[str]:
    steps = [s for s in run.steps if s.epoch == epoch]
    calls, spent, failures, seconds = _totals(steps)
    return [
        str(epoch),
        f"{_reward(run, epoch):.3f}",
        f"{sum(s.informative for s in steps)}/{sum(s.groups for s in steps)}",
        str(sum(sum(s.applied.values()) for s in steps)),
        str(sum(sum(s.retired.values()) for s in steps)),
        f"{sum(s.promoted for s in steps)} / {sum(s.demoted for s in steps)}",
        str(calls),
        str(spent),
        str(failures),
        f"{seconds:.1f}",
    ]


def _comparison(run: Run) -> list[str]:
    calls, spent, _, seconds = _totals(run.steps)
    last = run.epochs[-1] if run.epochs else -1
    lessons = sum(_size(_state(run, n, last))[0] for n in _roles(run))
    return [
        f"`{run.label}`",
        str(run.settings.get("scenario")),
        run.settings.get("model") or "(unnamed)",
        f"{_reward(run, last):.3f}" if run.steps else "–",
        str(lessons) if run.libraries is not None else "–",
        str(calls),
        str(spent),
        f"{seconds:.1f}",
    ]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]

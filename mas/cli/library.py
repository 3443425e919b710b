"""``mas library`` and ``mas graph``: the commands that read and change library files without
running the team (``mas promote`` too, in ``mas.cli.promote``: its options are the settings
models', which ``mas library show`` never needs).

Stage: none: the command line (library files, outside training).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console
from rich.markup import escape

from mas import paths
from mas.errors import UserError

if TYPE_CHECKING:  # the rest is imported where used: ``mas library show`` starts fast
    from mas.library.logs import SideFiles
    from mas.library.store import LibraryStore
    from mas.types.lessons import Provenance, Version

library_app = typer.Typer(
    no_args_is_help=True,
    help="Show, compare, export, import, review and recover libraries; add or remove a lesson, or roll back a "
    "library, by hand.",
)
graph_app = typer.Typer(no_args_is_help=True, help="The usage graph of a library file.")
app = typer.Typer(rich_markup_mode=None)
"""``mas library`` and ``mas graph``, for ``mas.cli.main`` to list under ``mas``."""
app.add_typer(library_app, name="library")
app.add_typer(graph_app, name="graph")
out = Console(soft_wrap=True)
Which = Annotated[
    str, typer.Argument(metavar="LIBRARY", help="A scenario name (libraries/NAME.json) or a library file.")
]


@library_app.command("show")
def library_show(
    which: Which,
    role: str | None = typer.Option(None, help="Only this library (a role name, or global)."),
    version: int | None = typer.Option(None, help="This version instead of the latest (needs --role)."),
    quarantine: bool = typer.Option(False, "--quarantine", help="The lessons refused by screening, with why."),
    rejected: bool = typer.Option(
        False, "--rejected", help="The operations and edits training refused, with why, where and when."
    ),
) -> None:
    """The lessons of each library, with their provenance."""
    store = store_of(which)
    if quarantine and rejected:
        raise UserError("--quarantine and --rejected: choose one")
    if quarantine:
        _print_quarantine(store, role)
        return
    if rejected:
        _print_rejected(store, role)
        return
    if version is not None:
        if role is None:
            raise UserError("--version needs --role")
        known(store, role)
        heads = {role: store.version(role, version)}
    else:
        heads = {name: v for name, v in store.heads().items() if role in (None, name)}
        if role is not None and not heads:
            raise UserError(f"{store.path}: unknown library {role!r} (has {', '.join(store.libraries()) or 'none'})")
    print_lessons(heads, provenance=True)
    if version is None:
        held = sum(len(lessons) for name, lessons in _held(store).items() if role in (None, name))
        if held:
            say(f"{held} lesson{'s' * (held != 1)} quarantined on load, in no prompt: see --quarantine")


Role = Annotated[str, typer.Argument(metavar="ROLE", help="The library (role name or global).")]
By = Annotated[
    str | None, typer.Option(help="Who does it: kept in the library's history.", show_default="your user name")
]
Needed = Annotated[str | None, typer.Option(help="Why (needed): kept in the library's history.", show_default=False)]


@library_app.command("diff")
def library_diff(
    which: Which,
    role: Role,
    old: Annotated[int, typer.Argument(metavar="OLD", help="Old version number.")],
    new: Annotated[
        int | None, typer.Argument(metavar="NEW", help="New version number.", show_default="the latest")
    ] = None,
) -> None:
    """What changed in ROLE's library between two versions, each change with the step (or
    promotion, pruning, review, import, rollback) that made it."""
    from mas.library.review import changed_by
    from mas.library.store import diff

    store = store_of(which)
    known(store, role)
    older = store.version(role, old)
    newer = store.head(role, screened=False) if new is None else store.version(role, new)  # as stored
    by = changed_by(store.versions(role), older, newer)
    for line in diff(older, newer) or ["(no change)"]:
        say(line)
        lesson = line[2:].partition(": ")[0]  # "+ solver/0003: text"
        if lesson in by:  # on a line of its own: the lines stay readable at 80 columns
            say(f"    by {by[lesson]}")


@library_app.command("export")
def library_export(
    which: Which,
    format: Literal["markdown", "prompt"] = typer.Option(
        "markdown", help="markdown, or prompt (the exact block a role's prompt gets)."
    ),
    role: str | None = typer.Option(None, help="Only this library (markdown); the role (--format prompt)."),
    task: str | None = typer.Option(None, help="The task text the block is chosen for (--format prompt)."),
    since: int | None = typer.Option(
        None, min=0, help="Only what changed in each library since its version N (markdown): a review diff."
    ),
) -> None:
    """Export the latest libraries as Markdown (each lesson with where it came from and its
    evidence per role; every role, with or without lessons), or one role's prompt block."""
    from mas.config import PromotionPolicy
    from mas.library import hierarchy, review
    from mas.library.inject import role_block
    from mas.library.logs import SideFiles

    store = store_of(which)
    roles = {event.role for event in SideFiles(store.path).usage.items()} | set(_scenario_roles(which))
    known = roles | set(store.libraries())
    if role is not None and role not in known:
        raise UserError(f"--role {role!r}: no such role or library here (known: {', '.join(sorted(known))})")
    if format == "markdown":
        effects = hierarchy.effects(store, PromotionPolicy())
        text = review.markdown(store, effects, roles=sorted(roles), only=role, since=since)
    else:
        if role is None:
            raise UserError("--format prompt needs --role")
        if since is not None:
            raise UserError("--since is for --format markdown")
        heads = {  # each lesson on its own line, whatever it holds
            name: v.model_copy(update={"lessons": [x.model_copy(update={"text": shown(x.text)}) for x in v.lessons]})
            for name, v in store.heads().items()
        }
        text = role_block(heads, role, task=task).text
    print("\n".join(shown(line) for line in text.split("\n")))


@library_app.command("import")
def library_import(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Another team's library file.", show_default=False)],
    into: str | None = typer.Option(
        None,
        "--into",
        metavar="LIBRARY",
        help="A scenario name or a library file.",
        show_default="libraries/<FILE's name>",
    ),
    role: str | None = typer.Option(None, help="Only this library of FILE."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would come in and what would not; write nothing."),
) -> None:
    """Bring another team's lessons into a library file: each lesson is screened, what passes is
    added as a new version of its library (provenance: FILE, its SHA-256, the time), what fails
    is quarantined with its reason."""
    from mas.library.importing import bring, plan
    from mas.library.logs import SideFiles
    from mas.library.store import LibraryStore

    target = library_path(into) if into is not None else paths.library_file(paths.slug(file.stem))
    if target.is_dir():
        raise UserError(f"--into {target}: a folder, not a library file")
    store = LibraryStore(target)
    store.heads()  # a damaged library file is named before anything is written
    SideFiles(store.path).check()
    incoming = plan(store, file, only=role)
    if not dry_run and (incoming.versions or incoming.quarantined):
        with store.exclusive():  # quarantined lessons of ours leave first: the versions follow the stored ones
            incoming = plan(store, file, only=role)
            bring(store, incoming)
    for their, ours, text in incoming.added:
        say(f"+ {ours}: {text} (their {their})")
    for their, item in incoming.quarantined:
        say(f"quarantined their {their}: {item.reason}")
    for their, why in incoming.skipped:
        say(f"skipped their {their}: {why}")
    verb = "would import" if dry_run else "imported"
    added = len(incoming.added)
    counts = (
        f"{added} lesson{'s' * (added != 1)}, {len(incoming.quarantined)} quarantined, {len(incoming.skipped)} skipped"
    )
    say(f"{verb} {counts} from {file} into {store.path}" + ("; nothing written" if dry_run else ""))
    scenario = into if into is not None else paths.slug(file.stem)
    if roles := _scenario_roles(scenario):  # a library no role reads is kept, and reaches no prompt
        for name in sorted({ours.split("/")[0] for _, ours, _ in incoming.added} - {"global", *roles}):
            say(f"note: no role of {scenario} reads library {name!r} ({', '.join(roles)} do)")


@library_app.command("rollback")
def library_rollback(
    which: Which,
    role: Role,
    version: Annotated[int, typer.Argument(metavar="VERSION", help="The version to return to.")],
    by: By = None,
    why: str | None = typer.Option(None, help="Why: kept in the library's history."),
) -> None:
    """Make a new version of ROLE's library equal to an earlier one; the version records who
    rolled back and why."""
    store = store_of(which)
    known(store, role)
    store.version(role, version)  # fails cleanly on an unknown version
    who = person(by)
    made = store.rollback(role, version, by=who, why=" ".join((why or "").split()))
    say(f"{role}: version {made.number} now equals version {version} ({lessons(made)}), by {who}")


@library_app.command("add")
def library_add(
    which: Which,
    role: Role,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The lesson, in one line.")],
    why: Needed = None,
    by: By = None,
) -> None:
    """Write one lesson into ROLE's library by hand (an operating procedure, a rule of the house):
    screened as a proposed lesson is, under the library's next id, recording who wrote it in and
    why. Training gathers its evidence as for any lesson, and may change or prune it."""
    from mas.library.screened import refusals
    from mas.library.store import LibraryStore, is_name

    if not (why and why.strip()):
        raise UserError("add needs --why (the reason is kept in the library's history)")
    if not is_name(role):
        raise UserError(f"ROLE: {role!r} is not a library name (a role's name, or global)")
    text = " ".join(text.split())
    if reason := refusals([text]).get(text):
        raise UserError(f"TEXT: refused by the screen ({reason}); nothing written")
    path = library_path(which)
    if path.is_dir():
        raise UserError(f"{path}: a folder, not a library file")
    store = LibraryStore(path)
    names = store.libraries()
    roles = _scenario_roles(which)
    if role not in names and role != "global" and roles and role not in roles:
        raise UserError(f"ROLE: {which} has no role {role!r} (its roles: {', '.join(roles)}, and global)")
    who = person(by)
    made = store.add(role, text, by=who, why=" ".join(why.split()))
    say(f"{role}: version {made.number} adds {made.lessons[-1].id} ({lessons(made)}), by {who}")
    if role not in names and not roles:
        say(f"note: {store.path} had no library {role!r}; it starts with this lesson")


@library_app.command("remove")
def library_remove(
    which: Which,
    lesson: Annotated[str, typer.Argument(metavar="LESSON_ID", help="The lesson, e.g. solver/0003.")],
    why: Needed = None,
    by: By = None,
) -> None:
    """Take one lesson out of its library: a new version without it, recording who removed it
    and why. Its id is never given to another lesson."""
    if not (why and why.strip()):
        raise UserError("remove needs --why (the reason is kept in the library's history)")
    store = store_of(which)
    library, _, number = lesson.rpartition("/")
    if not library or not number.isdigit():
        raise UserError(f"{lesson!r}: not a lesson id (LIBRARY/NUMBER, e.g. solver/0003)")
    known(store, library)
    who = person(by)
    made = store.remove(lesson, by=who, why=" ".join(why.split()))
    say(f"{library}: version {made.number} leaves out {lesson} ({lessons(made)} left), by {who}")


def lessons(version: Version) -> str:
    """``1 lesson``, ``3 lessons``: how many ``version`` holds."""
    return f"{len(version.lessons)} lesson{'s' * (len(version.lessons) != 1)}"


def person(by: str | None) -> str:
    """Who does what a command records (``--by``), by default the user name: one line, never empty."""
    if by is not None:
        if not by.strip():
            raise UserError("--by: empty; give a name")
        return " ".join(by.split())
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no user name in this environment
        raise UserError("--by: no user name found here; say who with --by NAME") from None


def _print_quarantine(store: LibraryStore, role: str | None) -> None:
    """The lessons screening refused: those training proposed, those found on load (still in
    the file, or taken out of it) and those an import left out, each with its reason."""
    from mas.library.logs import SideFiles

    log = SideFiles(store.path).quarantine
    rows = [(key, item) for key, items in log.steps() for item in items if role in (None, item.library)]
    held = [(name, lesson, why) for name, q in _held(store).items() if role in (None, name) for lesson, why in q]
    if not rows and not held:
        say(f"nothing quarantined in {log.path} or {store.path}")
    for key, item in rows:
        say(f"[{item.library}] {_cut(item.text)}")
        if item.stage == "import" and item.source is not None:
            where = f"not imported from {item.source.file} ({_source(item.source)})"
        elif item.stage == "load":
            where = f"found in the library file, taken out by {key.run}"
        else:
            where = f"run {key.run}, epoch {key.epoch}, step {key.step}, at the {item.stage} stage"
        say(f"  refused: {item.reason} ({where})")
    for name, lesson, why in held:
        say(f"[{name}] [{lesson.id}] {_cut(lesson.text)}")
        say(f"  refused: {why} (in the library file, in no prompt; the next training run, promotion, rollback or "
            "import takes it out)")  # fmt: skip


def _cut(text: str) -> str:
    """``text``, or its start when it is longer than any lesson may be (a refused one may be)."""
    from mas.library.edits import MAX_CHARS

    return text if len(text) <= MAX_CHARS else f"{text[:MAX_CHARS]}... ({len(text)} characters)"


def _held(store: LibraryStore) -> dict:
    """The lessons of the latest versions that fail the screen, by library."""
    from mas.library.screened import quarantined

    return {name: q for name, v in store.heads(screened=False).items() if (q := quarantined(v))}


def _source(source) -> str:
    return f"its {source.library} v{source.version}, sha256 {source.sha256[:12]}, read {source.at}"


def _print_rejected(store: LibraryStore, role: str | None) -> None:
    """The refused operations and edits of the log; for steps from before the log, the refused
    edits their library versions kept; and the held edits a review rejected (or whose text a
    reviewer replaced), which only their versions keep."""
    from mas.library.logs import SideFiles, StepKey
    from mas.types.lessons import BY_HAND

    log = SideFiles(store.path).rejected
    rows = [(key, item.library, item.edit, item.reason, item.stage) for key, items in log.steps() for item in items]
    logged = {key for key, *_ in rows}
    for name in store.libraries():
        for v in store.versions(name):
            p = v.provenance
            if p is None or p.stage in BY_HAND:  # a rollback or a removal: it refuses nothing
                continue
            key = StepKey(p.run, p.epoch, p.step)
            if p.stage == "edit" and key not in logged:
                rows += [(key, name, r.edit, r.reason, "edit") for r in v.rejected]
            elif p.stage == "review":  # the step logged what it refused, not what a review did
                rows += [(key, name, r.edit, f"{r.reason}; held #{p.pending}", "review") for r in v.rejected]
    rows = [row for row in rows if role in (None, row[1])]
    if not rows:
        say(f"nothing refused in {log.path}")
    for key, library, edit, reason, stage in rows:
        say(f"[{library or '?'}] {_proposed(edit)}")
        say(f"  refused: {reason} (run {key.run}, epoch {key.epoch}, step {key.step}, at the {stage} stage)")


def _proposed(edit: dict | str) -> str:
    """An operation or edit in one line: ``add: When ...``, ``modify solver/0003: When ...``."""
    if not isinstance(edit, dict):
        return str(edit)
    op, target, text = edit.get("op", "?"), edit.get("id") or "", edit.get("text") or ""
    head = f"{op} {target}".strip()
    return f"{head}: {text}" if text else head if set(edit) <= {"op", "id", "reason", "library"} else f"{head}: {edit}"


def _scenario_roles(which: str) -> list[str]:
    """The roles of the scenario ``which`` names (none for a library file, or a scenario that
    cannot be loaded: the export shows the libraries and the roles with evidence then)."""
    from mas.team.scenario import load_scenario

    if which.endswith(".json"):
        return []
    try:
        return load_scenario(which).role_names
    except UserError:
        return []


def store_of(which: str) -> LibraryStore:
    """A scenario name or a library file path; the file must exist. A missing library of a
    scenario says which command writes it: a new user meets this before any ``mas train``."""
    from mas.library.store import LibraryStore

    path = library_path(which)
    if not path.exists():
        made_by = f" (mas train {which} writes it with its first lesson)" if path != Path(which) else ""
        raise UserError(f"{path}: no such library file{made_by}")
    if path.is_dir():
        raise UserError(f"{path}: a folder, not a library file")
    return LibraryStore(path)


def known(store: LibraryStore, role: str) -> None:
    """Refuse a library the file does not hold, naming the ones it does: "has no version 1" would
    send the user looking for a version of a library that was never there (a typo in ROLE)."""
    names = store.libraries()
    if role not in names:
        raise UserError(f"{store.path}: unknown library {role!r} (has {', '.join(names) or 'none'})")


def library_path(which: str) -> Path:
    """The library file ``which`` names: a path when it ends in ``.json`` or has a folder in it,
    or when it is a file and no scenario of that name has a library; else the scenario's
    library (``libraries/NAME.json``). Error messages name a library file by its path (``mas
    library recover PATH``), whatever its suffix, so such a path must work as LIBRARY."""
    path = Path(which)
    if which.endswith(".json") or len(path.parts) > 1:
        return path
    if paths.safe_name(which) is None:
        return path if path.is_file() else paths.library_file(which)  # the latter names the bad name
    named = paths.library_file(which)
    return path if not named.exists() and path.is_file() else named


_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
"""Characters a terminal acts on or that reorder what it shows: control characters (escape
sequences start with one; newlines would fake extra lines), bidirectional overrides and
isolates, zero-width characters, lone surrogates."""


def shown(text: str) -> str:
    """``text`` fit to print on one terminal line: every character above written as its
    escape (``\\x1b``, ``\\u202e``), so a lesson shows what it holds and does nothing else.

    >>> shown("Check \\x1b[31mred\\x1b[0m \\u202eevil")
    'Check \\\\x1b[31mred\\\\x1b[0m \\\\u202eevil'
    """
    return _UNSAFE.sub(lambda m: m[0].encode("unicode_escape", "backslashreplace").decode("ascii"), text)


def say(text: str) -> None:
    out.print(shown(text), markup=False, highlight=False)


def print_lessons(heads, *, provenance: bool = False) -> None:
    """Each library's name and version, then its lessons one to a line: printed as one block
    (a print of rich's costs about 0.1 ms, a library file can hold hundreds of lessons)."""
    for name, v in heads.items():
        count = lessons(v)
        out.print(f"[bold]{escape(shown(name))}[/bold] v{v.number}: {count}")
        lines = [f"  [{lesson.id}] {lesson.text}" for lesson in v.lessons]
        lines += [f"  ({describe(v.provenance)})"] if provenance and v.provenance else []
        if lines:
            out.print("\n".join(map(shown, lines)), markup=False, highlight=False)


def describe(p: Provenance) -> str:
    """Where a version came from, in one line: ``run r1, epoch 0, step 2, model fake, tasks a, b``;
    a version not made by a step's edits says what made it (``fresh``, ``promotion``, ...); one
    a person made by hand, who and why (``run rollback-20260101-120000, ana's rollback to version 2``)."""
    from mas.types.lessons import BY_HAND

    if p.stage in BY_HAND:  # no step made it: its run names when (``rollback-<time>``)
        from mas.library.review import person_change

        return f"run {p.run}, {person_change(p)}"
    parts = [f"run {p.run}", f"epoch {p.epoch}", f"step {p.step}"]
    parts += [] if p.stage in ("edit", "review") else [f"by {p.stage}"]
    if p.stage == "review":
        parts.append(f"held #{p.pending}, decided in review by {p.by}" + (f" ({p.why})" if p.why else ""))
    parts += [f"model {p.model}"] if p.model else []
    parts += [f"tasks {', '.join(p.task_ids)}"] if p.task_ids else []
    parts += [f"from {p.source.file} ({_source(p.source)})"] if p.source else []
    return ", ".join(parts)


@graph_app.command("export")
def graph_export(
    which: Which,
    format: Literal["html", "graphml"] = typer.Option(
        "html", help="html (a self-contained page) or graphml (Gephi, yEd)."
    ),
    output: Path | None = typer.Option(None, help="Where to write.", show_default="next to the library file"),
    tasks: bool = typer.Option(True, "--tasks/--no-tasks", help="Lesson -> task edges (many; they swamp Gephi)."),
) -> None:
    """Write the usage graph: roles, lessons, the randomized evidence on each role -> lesson
    edge (trial edges for transfer trials), and the promotions."""
    from mas.library.logs import SideFiles
    from mas.paths import atomic_write
    from mas.redact import redact
    from mas.studies.graph_view import export

    store = store_of(which)
    side = SideFiles(store.path)
    target = side.graph(format) if output is None else _output(output, side, format)
    with store.exclusive(settle=False):  # an export changes no library
        text, graph = export(store, format, tasks=tasks)
        atomic_write(target, redact(text))
    say(f"wrote {target} ({graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges)")


_GRAPH_FILES = {"html": (".html", ".htm"), "graphml": (".graphml", ".xml")}


def _output(output: Path, side: SideFiles, format: str) -> Path:
    """An output path that replaces no file of the library (through symlinks too), nor any
    file but an earlier graph (another library, a journal), and that names a file in an
    existing folder."""
    try:
        target = output.resolve()
    except (RuntimeError, OSError) as e:
        raise UserError(f"--output {output}: cannot resolve ({e})") from None
    if target in side.owned():
        raise UserError(f"--output {output}: a file of the library {side.library}; choose another path")
    if target.is_dir():
        raise UserError(f"--output {output}: a folder; name a file")
    if not target.parent.is_dir():
        raise UserError(f"--output {output}: no folder {target.parent}")
    if target.exists() and target.suffix.lower() not in _GRAPH_FILES[format]:
        kinds = " or ".join(_GRAPH_FILES[format])
        raise UserError(f"--output {output}: exists and is no {kinds} file; choose another path or remove it")
    return target


@library_app.command("recover")
def library_recover(which: Which) -> None:
    """Restore a corrupt library file from its backup (the last good version, <file>.bak), and
    set aside the bad lines of its logs (in <log>.bad)."""
    from mas.library.logs import SideFiles, set_aside
    from mas.library.store import LibraryStore, NotCorrupt

    store = LibraryStore(library_path(which))
    if store.path.is_dir():
        raise UserError(f"{store.path}: a folder, not a library file")
    side = SideFiles(store.path)
    if store.healthy() and not side.damaged():  # checked first: no lock file for nothing
        found = store.path.exists() or store.backup.exists()
        raise UserError(f"{store.path}: {'not corrupt, nothing to recover' if found else 'no such library file'}")
    with store.exclusive(settle=False):  # a damaged file cannot be screened
        try:
            count = store.recover()
        except NotCorrupt:
            count = None
        aside = {path: set_aside(path, *lines) for path, lines in side.damaged().items()}
    if count is None and not any(aside.values()):
        raise UserError(f"{store.path}: not corrupt, nothing to recover")
    if count is not None:
        say(f"{store.path}: restored {count} versions from {store.backup}")
    for path, n in aside.items():
        if n:
            say(f"{path}: set {n} bad line{'s' * (n > 1)} aside in {path}.bad")


from mas.cli import review as _review  # noqa: E402, F401  (declares ``mas library review`` on library_app)

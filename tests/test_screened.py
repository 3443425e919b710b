"""A library file is untrusted input: a lesson typed into it by hand (never screened) reaches no
prompt unless it passes the screen, on every path a library takes into a prompt: ``mas train``
(the team's calls and the learning calls), ``mas eval``, ``mas library export --format prompt``,
``mas.LessonMemory``, ``mas.system_message``; a harmless one typed in reaches them all. What
fails is quarantined with its reason, and ``mas library show`` says so."""

from __future__ import annotations

import json
import shutil

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient

import mas
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.team.scenario import Role
from tests.attacks import ATTACKS, HARMLESS, MISSED, hand_written, leaked
from tests.inprocess import cli

TASK = "A train travels at 60 km per hour for 3 hours. How far does it go?"


@pytest.fixture
def library(tmp_path):
    return hand_written(tmp_path / "libraries" / "maths.json")


def test_the_python_api_composes_no_hostile_lesson(library):
    heads = mas.load_library(str(library))
    role = Role(name="solver", description="Solves.", system_prompt="You are the solver.")
    prompt = mas.system_message(role, heads, task=TASK)
    assert leaked([prompt]) == []
    assert HARMLESS["solver"] in prompt and HARMLESS["global"] in prompt
    store = LibraryStore(library)
    assert leaked([l.text for v in store.heads().values() for l in v.lessons]) == []
    assert {l.id for l in store.head("solver").lessons} == {"solver/0004"}  # the harmless one, its id kept


async def test_lesson_memory_gives_an_agent_no_hostile_lesson(library):
    client = mas.FakeClient(lambda request: "ANSWER: 180")
    memory = mas.LessonMemory(library, role="solver")
    agent = AssistantAgent("solver", model_client=client, system_message="You are the solver.", memory=[memory])
    await agent.run(task=TASK)
    [request] = client.requests
    assert leaked([request.system, *request.messages]) == []
    assert HARMLESS["solver"] in request.system and HARMLESS["global"] in request.system
    queried = await memory.query(TASK)
    assert leaked([r.content for r in queried.results]) == []


def test_export_prompt_shows_no_hostile_lesson(library, capsys, monkeypatch):
    for role in ("planner", "solver", "verifier"):
        code, out, err = cli(["library", "export", library, "--format", "prompt", "--role", role], capsys, monkeypatch)
        assert code == 0, err
        assert leaked([out]) == [] and HARMLESS["global"] in out
    code, out, err = cli(["library", "export", library, "--format", "prompt", "--role", "solver"], capsys, monkeypatch)
    assert HARMLESS["solver"] in out


@pytest.fixture
def endpoint(tmp_path, fault_server, monkeypatch):
    """A model config of a loopback endpoint that keeps every request it gets."""
    config = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=fault_server.url, api_key="sk-loopback-key")
    path = tmp_path / "model.json"
    path.write_text(json.dumps(config.dump_component().model_dump(mode="json")))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-key")
    return path


def _texts(bodies: list[dict]) -> list[str]:
    return [json.dumps(b["messages"], ensure_ascii=False) for b in bodies] + [
        str(m.get("content")) for b in bodies for m in b["messages"]
    ]


def test_eval_and_train_send_no_hostile_lesson(library, endpoint, fault_server, tmp_path, capsys, monkeypatch):
    trained = shutil.copy(library, tmp_path / "trained.json")
    code, out, err = cli(
        ["eval", "maths", "--model-config", endpoint, "--library", library, "--k", "1", "--tasks", "3", "--json"],
        capsys, monkeypatch,
    )  # fmt: skip
    assert code == 0, err
    sent = _texts(fault_server.bodies)
    assert leaked(sent) == [] and any(HARMLESS["solver"] in t for t in sent)

    fault_server.bodies.clear()
    code, out, err = cli(
        ["train", "maths", "--model-config", endpoint, "--library", trained, "--run-dir", tmp_path / "run",
         "--tasks", "8", "--group-size", "3", "--inject", "all"],
        capsys, monkeypatch,
    )  # fmt: skip
    assert code == 0, err
    sent = _texts(fault_server.bodies)
    learning = [b for b in fault_server.bodies if b.get("response_format")]
    assert learning, "the learning calls went to the endpoint too"
    assert leaked(sent) == [] and any(HARMLESS["solver"] in t for t in sent)
    assert leaked(out.splitlines()) == []  # the lessons training prints at the end

    # the file says what left and why: a version of each library deleting its hostile lessons,
    # and each of them in the quarantine log with its reason
    store = LibraryStore(trained)
    screened = [v for name in store.libraries() for v in store.versions(name) if v.provenance.stage == "screen"]
    assert {v.library for v in screened} == {"global", "planner", "solver", "verifier"}
    assert all(e.op == "delete" for v in screened for e in v.edits)
    logged = list(SideFiles(store.path).quarantine.items())
    assert sorted(i.text for i in logged if i.stage == "load") == sorted(ATTACKS.values())
    assert all(i.reason for i in logged)
    assert leaked([l.text for v in store.heads().values() for l in v.lessons]) == []


def test_show_tells_what_is_quarantined_and_why(library, capsys, monkeypatch):
    before = {p: p.read_bytes() for p in library.parent.iterdir()}
    code, out, err = cli(["library", "show", library], capsys, monkeypatch)
    assert code == 0, err
    assert leaked([out]) == [] and HARMLESS["solver"] in out
    assert "9 lessons quarantined" in out
    code, out, err = cli(["library", "show", library, "--quarantine"], capsys, monkeypatch)
    assert code == 0, err
    assert sorted(leaked([out])) == sorted(ATTACKS)  # listed for review, with their reasons
    assert out.count("refused:") == len(ATTACKS)
    assert {p: p.read_bytes() for p in library.parent.iterdir()} == before  # showing writes nothing


def test_a_lesson_changed_by_hand_is_screened_again(tmp_path):
    path = hand_written(tmp_path / "lib.json", {"solver": [HARMLESS["solver"]]})
    assert [l.text for l in LibraryStore(path).head("solver").lessons] == [HARMLESS["solver"]]
    path.write_text(path.read_text().replace(HARMLESS["solver"], ATTACKS["fixed"]))
    assert LibraryStore(path).head("solver").lessons == []
    assert (
        leaked(
            [mas.system_message(Role(name="solver", description="d", system_prompt="p"), mas.load_library(str(path)))]
        )
        == []
    )


@pytest.mark.xfail(strict=True, reason="first contact: the screen lets this exfiltration lesson through")
def test_what_the_screen_misses_reaches_the_prompt(tmp_path):
    path = hand_written(tmp_path / "lib.json", {"solver": list(MISSED.values())})
    role = Role(name="solver", description="d", system_prompt="p")
    assert leaked([mas.system_message(role, mas.load_library(str(path)))], MISSED) == []


def test_verdicts_are_kept_on_this_machine_by_digest(tmp_path, monkeypatch):
    """Nothing in a library file says a lesson was screened: the verdicts are in the user's
    cache, by the digest of the text, under the digest of the screen; a line cut short never
    reads as a pass."""
    from mas.library import screened

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(screened, "_known", {})
    monkeypatch.setattr(screened, "_read", set())
    texts = [HARMLESS["solver"], ATTACKS["fixed"]]
    first = screened.refusals(texts)
    assert list(first) == [ATTACKS["fixed"]]
    record = screened.record()
    assert record.is_relative_to(tmp_path / "cache") and screened.fingerprint()[:32] in record.name
    kept = record.read_text()
    assert sorted(line[0] for line in kept.splitlines()) == ["+", "-"] and not any(t in kept for t in texts)

    monkeypatch.setattr(screened, "_known", {})  # a new process: the record is read, the screen not run
    monkeypatch.setattr(screened, "_read", set())
    monkeypatch.setattr(screened, "_screen", lambda text: pytest.fail("screened again"))
    assert screened.refusals(texts) == first

    passed, refused = sorted(kept.splitlines())
    record.write_text(f"{passed[:40]}\n{refused[:30]}\n")  # both cut short
    monkeypatch.setattr(screened, "_known", {})
    monkeypatch.setattr(screened, "_read", set())
    monkeypatch.setattr(screened, "_screen", lambda text: "screened again")
    assert screened.refusals([HARMLESS["solver"]]) == {HARMLESS["solver"]: "screened again"}

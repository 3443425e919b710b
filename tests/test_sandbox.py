"""The python tool: model-written code runs isolated and limited, never in mas.

The probes are what model-written code did to an earlier version of the tool (issue 12).
Each runs in both modes: isolated, where it must fail, and opted out of isolation, where it
must succeed, so a probe that could not leak anyway proves nothing.
"""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall

import mas
from mas.cli.main import main
from mas.errors import UserError
from mas.meter import Meter
from mas.models.fake import FakeClient
from mas.team.rollout import run_rollout
from mas.team.scenario import custom_scenario, load_scenario
from mas.tools import TOOLS, cgroups, isolation, sandbox
from mas.tools.sandbox import Limits, run_python
from mas.types.tasks import Task


def run(code, **limits):
    return asyncio.run(run_python(code, Limits(**limits)))


def test_it_runs_code_and_returns_the_output():
    assert run("print(sum(range(10)))") == "45"
    assert "ZeroDivisionError" in run("1/0")


def test_no_secrets_and_a_scratch_directory(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    out = run("import os; print(sorted(os.environ)); print(os.getcwd()); open('x.txt', 'w').write('hi')")
    env, cwd = out.splitlines()[:2]
    assert "OPENAI_API_KEY" not in env and "sk-do-not-leak" not in out
    assert "mas-sandbox-" in cwd and not os.path.exists(cwd)  # the scratch directory is gone


@pytest.mark.parametrize(
    "code, limits, expected",
    [
        ("while True: pass", {"cpu_seconds": 1}, "signal"),
        ("x = bytearray(2_000_000_000)", {"memory_mb": 128}, "MemoryError"),
        ("import time; time.sleep(30)", {"wall_seconds": 1}, "ran past 1 s"),
        ("print('y' * 100_000)", {}, "y"),
    ],
)
def test_runaway_code_is_stopped(code, limits, expected):
    started = time.monotonic()
    out = run(code, **limits)
    assert expected in out and len(out) <= 2000 + 100
    assert time.monotonic() - started < 8


def test_a_hanging_tool_call_cannot_hold_the_rollout_past_its_deadline():
    def respond(request):
        if request.tool_results:
            return "ANSWER: 1"
        return [FunctionCall(id="1", name="python", arguments='{"code": "import time; time.sleep(60)"}')]

    def team(prompts, client, task):
        agent = AssistantAgent(
            "coder", model_client=client, system_message=prompts["coder"], tools=[TOOLS["python"](task)]
        )
        return RoundRobinGroupChat([agent], max_turns=1)

    scenario = custom_scenario("s", roles={"coder": "You are the coder."}, team=team, tasks=[], reward=lambda t, a: 0.0)
    started = time.monotonic()
    rollout = asyncio.run(run_rollout(
        scenario, Task(id="t", question="q"), 0, client=FakeClient(respond), heads={}, settings={}, timeout=1.0, meter=Meter(),
    ))  # fmt: skip
    assert rollout.error.startswith("timeout") and time.monotonic() - started < 5
    assert "sleep(60)" not in os.popen("ps -eo args").read()  # the child was killed, not left running


# -- the probes ----------------------------------------------------------------------------


@pytest.fixture(params=["isolated", "unsafe"])
def unsafe(request, monkeypatch) -> bool:
    """True when the test runs opted out of isolation, where the probe must succeed."""
    if request.param == "unsafe":
        monkeypatch.setenv(isolation.UNSAFE_ENV, "1")
        monkeypatch.setattr(isolation, "_warned", True)
    else:
        monkeypatch.delenv(isolation.UNSAFE_ENV, raising=False)
    return request.param == "unsafe"


def alive(marker: str) -> list[int]:
    """Host PIDs of the processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def gone(marker: str, seconds: float) -> bool:
    """Whether every process whose command line holds ``marker`` has ended within ``seconds``."""
    deadline = time.monotonic() + seconds
    while alive(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def in_child_process(code: str, env: dict[str, str], **limits) -> dict:
    """run_python in a fresh process started with ``env``; its output and its peak RSS."""
    script = textwrap.dedent(f"""
        import asyncio, json
        from mas.tools.sandbox import Limits, run_python
        def peak():
            return int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024
        before = peak()
        out = asyncio.run(run_python({code!r}, Limits(**{limits!r})))
        print(json.dumps({{"out": out, "before_mb": before, "peak_mb": peak()}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_parents_environment_is_out_of_reach(unsafe):
    """Model code read the API key from /proc/<ppid>/environ of mas: 4 times in journal.jsonl."""
    code = textwrap.dedent("""
        import os
        for pid in [os.getppid()] + [p for p in os.listdir('/proc') if p.isdigit()]:
            try:
                print(open(f'/proc/{pid}/environ').read())
            except OSError as exc:
                print(pid, type(exc).__name__)
    """)
    out = in_child_process(code, {**os.environ, "OPENAI_API_KEY": "sk-probe-4242"})["out"]
    assert ("sk-probe-4242" in out) == unsafe, out


@pytest.mark.parametrize(
    "code, leak",
    [
        ("print(open('/etc/passwd').read())", "root:"),
        (f"print(open({mas.__file__!r}).read())", "Training-Free GRPO"),  # the project's source
        ("import mas; print('imported', mas.__file__)", "imported"),  # and its library store
    ],
    ids=["passwd", "source", "import-mas"],
)
def test_host_files_are_out_of_reach(unsafe, code, leak):
    out = run(code)
    assert (leak in out) == unsafe, out


def test_nothing_is_written_outside_the_scratch_directory(unsafe, tmp_path):
    """Model code wrote straight into a library file, skipping screening."""
    library = tmp_path / "libraries" / "maths.json"
    library.parent.mkdir()
    library.write_text("{}")
    code = f"import os; os.makedirs({str(library.parent)!r}, exist_ok=True); open({str(library)!r}, 'w').write('x')"
    run(code)
    assert (library.read_text() == "x") == unsafe


def test_no_network_not_even_loopback(unsafe):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        out = run(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')")
    finally:
        listener.close()
    assert ("connected" in out) == unsafe, out


def test_mas_cannot_be_signalled(unsafe):
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: received.append(1))
    try:
        out = run(
            textwrap.dedent(f"""
            import os, signal
            for pid in {{os.getppid(), {os.getpid()}}}:
                try:
                    os.kill(pid, signal.SIGUSR1)
                except OSError as exc:
                    print(pid, type(exc).__name__)
        """)
        )
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert bool(received) == unsafe, out


@pytest.mark.parametrize("ending", ["deadline", "exit"])
def test_detached_grandchildren_die_with_the_code(unsafe, tmp_path, ending):
    """Four orphans (setsid, double fork) were alive and writing 40 s later, holding 4 x 400 MB.
    They end with the code: at its deadline, or when it exits."""
    marker, beat = uuid.uuid4().hex, tmp_path / "beat"
    code = textwrap.dedent(f"""
        import os, time  # {marker}
        for _ in range(4):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    null = os.open('/dev/null', os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    hold = b'x' * 200_000_000
                    while True:
                        try:
                            with open({str(beat)!r}, 'a') as f:
                                f.write('.')
                        except OSError:
                            pass
                        time.sleep(0.05)
                os._exit(0)
        time.sleep(60 if {ending == "deadline"} else 1)
    """)
    try:
        started = time.monotonic()
        out = run(code, wall_seconds=2)
        assert ("ran past 2 s" in out) == (ending == "deadline") and time.monotonic() - started < 4, out
        left = alive(marker)
        held_mb = sum(_rss_mb(pid) for pid in left)
        assert bool(left) == unsafe and (held_mb > 600) == unsafe, (left, held_mb)
        size = beat.stat().st_size if beat.exists() else 0
        time.sleep(0.5)
        assert ((beat.stat().st_size if beat.exists() else 0) > size) == unsafe  # still writing
    finally:
        kill(alive(marker))


def test_the_sandbox_dies_with_mas(unsafe):
    marker = uuid.uuid4().hex
    code = f"import time  # {marker}\ntime.sleep(60)"
    script = (
        f"import asyncio; from mas.tools.sandbox import *; asyncio.run(run_python({code!r}, Limits(wall_seconds=60)))"
    )
    mas_process = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60  # until the code runs: a loaded machine takes a while to start mas
        while not set(alive(marker)) - {mas_process.pid}:
            assert time.monotonic() < deadline and mas_process.poll() is None, "the code never started"
            time.sleep(0.05)
        mas_process.kill()
        mas_process.wait()
        assert gone(marker, 2) != unsafe
    finally:
        kill(alive(marker))


def test_the_sandbox_dies_with_mas_killed_before_bwrap_starts():
    """mas killed while the sandbox is still on its way (here a slow start in front of bwrap,
    as when entering the cgroup takes a while): bwrap then runs with mas gone. It used to die
    writing --info-fd between forking its child and letting it go, and the child waited for
    ever; now the sandbox starts, finds the lifeline closed and ends."""
    marker = uuid.uuid4().hex
    code = f"import time  # {marker}\ntime.sleep(60)"
    slow = ["/bin/sh", "-c", 'sleep 0.5; exec "$@"', "sh"]
    script = (
        "import asyncio; from mas.tools import isolation; from mas.tools.sandbox import Limits, _bwrapped; "
        f"asyncio.run(_bwrapped({code!r}, Limits(wall_seconds=60), isolation.require(), {slow!r}))"
    )
    mas_process = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ), stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):  # until the slow start runs
            if set(alive(marker)) - {mas_process.pid}:  # the slow start, pausing before bwrap
                break
            time.sleep(0.02)
        mas_process.kill()
        mas_process.wait()
        time.sleep(1)  # bwrap has started by now
        assert gone(marker, 3)
    finally:
        kill(alive(marker))


def test_the_lifeline_ends_the_sandbox_when_bwrap_is_gone():
    """The sandbox is tied to mas by the lifeline alone (bwrap's --die-with-parent comes too
    late, see mas.tools.isolation): bwrap killed, the sandbox runs on until mas's end closes."""
    marker = uuid.uuid4().hex
    lifeline, lifeline_w = os.pipe()
    argv = isolation.command(
        isolation.require(), f"import time  # {marker}\ntime.sleep(60)", cpu=5, memory_mb=256, processes=8,
        scratch_mb=1, info_fd=None, lifeline=lifeline,
    )  # fmt: skip
    bwrap = subprocess.Popen(argv, pass_fds=(lifeline,), env={})
    os.close(lifeline)
    try:
        for _ in range(100):
            if len(alive(marker)) >= 3:  # bwrap's PID 1, the launcher and the code
                break
            time.sleep(0.05)
        bwrap.kill()
        bwrap.wait()
        time.sleep(0.3)
        assert alive(marker)  # unbound: it outlives bwrap
        os.close(lifeline_w)  # what mas dying does
        lifeline_w = None
        assert gone(marker, 2)
    finally:
        if lifeline_w is not None:
            os.close(lifeline_w)
        kill(alive(marker))


def _rss_mb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) // 1024 for line in status.splitlines() if line.startswith("VmRSS")), 0)


def test_the_process_count_is_capped(unsafe):
    marker = uuid.uuid4().hex
    code = textwrap.dedent(f"""
        import os, time  # {marker}
        started = 0
        for _ in range(100):
            try:
                if os.fork() == 0:
                    time.sleep(3)
                    os._exit(0)
                started += 1
            except OSError:
                break
        print('started', started)
    """)
    try:
        out = run(code, processes=16)
    finally:
        kill(alive(marker))
    started = int(out.split()[-1])
    assert started == 100 if unsafe else started < 16, out


def test_memory_is_capped_per_process(unsafe):
    assert "MemoryError" in run("x = b'x' * 600_000_000", memory_mb=512)


TREE_OF_8_X_200_MB = textwrap.dedent("""
    import os, time
    pids = []
    for _ in range(8):
        pid = os.fork()
        if pid == 0:
            held = b"x" * (200 << 20)  # within the 512 MB each process may hold
            time.sleep(1)
            os._exit(0)
        pids.append(pid)
    statuses = [os.waitpid(pid, 0)[1] for pid in pids]
    print("ended normally", sum(os.WIFEXITED(s) and os.WEXITSTATUS(s) == 0 for s in statuses))
""")


def tree_cap_here() -> str:
    """Why no whole-tree cap can be made on this machine, or "" when one can."""
    cap, why = cgroups.open_cap(memory_mb=64, processes=8)
    if cap is not None:
        cap.close()
    return why


def test_the_whole_process_tree_is_capped_in_memory(monkeypatch):
    """Four orphans held 4 x 400 MB past the 512 MB cap: 8 x 200 MB passes every per-process
    limit, so only a cap on the tree's total can stop it."""
    if why := tree_cap_here():
        pytest.skip(f"no cgroup for a whole-tree cap here: {why}")
    monkeypatch.delenv(isolation.UNSAFE_ENV, raising=False)
    made, real = [], cgroups.open_cap
    monkeypatch.setattr(cgroups, "open_cap", lambda **kw: made.append(real(**kw)) or made[-1])
    out = run(TREE_OF_8_X_200_MB, tree_memory_mb=1024)
    assert int(out.splitlines()[0].split()[-1]) < 8, out
    assert "passed the 1024 MB memory cap" in out
    assert run("print(len(b'x' * (300 << 20)) >> 20)", tree_memory_mb=1024) == "300"  # an honest program runs
    assert len(made) == 2 and not any(folder.exists() for cap, _ in made for folder in cap.dirs)  # removed after


def test_without_cgroups_the_per_process_limits_remain_and_it_says_so(monkeypatch, capsys):
    monkeypatch.delenv(isolation.UNSAFE_ENV, raising=False)
    monkeypatch.setenv(cgroups.ENV, "0")
    monkeypatch.setattr(sandbox, "_warned_tree", False)
    assert run(TREE_OF_8_X_200_MB) == "ended normally 8"  # what the cap above stops
    assert "memory is capped per process only (512 MB x 16 processes)" in capsys.readouterr().err
    assert "MemoryError" in run("x = b'x' * 600_000_000", memory_mb=512)


def test_printing_400_mb_costs_mas_almost_nothing(unsafe):
    """Printing 400 MB took mas from 116 MB to 880 MB: the output was read whole, then cut."""
    code = "import sys\nfor _ in range(400):\n    sys.stdout.write('x' * 1_000_000)"
    started = time.monotonic()
    done = in_child_process(code, dict(os.environ))
    assert done["peak_mb"] - done["before_mb"] < 30, done
    assert time.monotonic() - started < 10
    assert done["out"].startswith("xxx") and "stopped: the code printed more than" in done["out"]
    assert len(done["out"]) < 2100


def test_what_the_code_sees():
    uid, pid, *top = run("import os; print(os.getuid(), os.getpid(), *os.listdir('/'))").split()
    assert uid != "0" and int(pid) <= 3  # not root; in a PID namespace of its own
    assert {"dev", "proc", "tmp"} <= set(top) and not {"etc", "home", "var", "work"} & set(top), top
    assert "ModuleNotFoundError" in run("import pydantic")  # no site-packages: the standard library only


# -- refusal and opt-in --------------------------------------------------------------------


@pytest.fixture
def no_bwrap(monkeypatch):
    monkeypatch.setenv(isolation.BWRAP_ENV, "/nonexistent/bwrap")
    monkeypatch.delenv(isolation.UNSAFE_ENV, raising=False)


@pytest.mark.parametrize(
    "bwrap, fix", [("/nonexistent/bwrap", "apt-get install bubblewrap"), ("/bin/false", "let bwrap create namespaces")]
)
def test_without_working_bubblewrap_the_tool_refuses_in_one_line(no_bwrap, monkeypatch, bwrap, fix):
    monkeypatch.setenv(isolation.BWRAP_ENV, bwrap)
    for attempt in (isolation.require, lambda: TOOLS["python"](Task(id="t", question="q")), lambda: run("print(1)")):
        with pytest.raises(UserError) as refused:
            attempt()
        message = str(refused.value)
        assert "\n" not in message and fix in message and "--unsafe-python-tool" in message, message


def coder_scenario(folder: Path) -> Path:
    (folder / "roles").mkdir(parents=True)
    (folder / "scenario.toml").write_text(
        'name = "coding"\nroles = ["coder"]\ntasks = "tasks.jsonl"\nreward = "numeric"\n'
    )
    (folder / "tasks.jsonl").write_text('{"id": "1", "question": "1 + 1?", "answer": "2"}\n')
    (folder / "roles" / "coder.toml").write_text(
        'name = "coder"\ndescription = "Computes."\ntools = ["python"]\nsystem_prompt = "You are the coder."\n'
    )
    return folder


def mas_cli(args, capsys, monkeypatch) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["mas", *args])
    try:
        main()
    except SystemExit as done:
        return done.code, capsys.readouterr().err
    return 0, capsys.readouterr().err


def test_a_scenario_that_needs_the_tool_is_refused_at_load_before_anything_is_written(
    no_bwrap, tmp_path, home, capsys, monkeypatch
):
    folder = coder_scenario(tmp_path / "coding")
    with pytest.raises(UserError, match="coder.toml: the python tool cannot be isolated here"):
        load_scenario(str(folder))
    code, err = mas_cli(["train", str(folder), "--model", "fake", "--tasks", "1"], capsys, monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "apt-get install bubblewrap" in err, err
    assert not list(home.rglob("*"))
    load_scenario("maths")  # a scenario without the python tool never needs bubblewrap


@pytest.mark.parametrize("value", ["false", "no", "off", "0", " FALSE "])
def test_an_opt_out_that_says_no_keeps_the_isolation(value, no_bwrap, monkeypatch):
    monkeypatch.setenv(isolation.UNSAFE_ENV, value)
    with pytest.raises(UserError, match="apt-get install bubblewrap"):
        isolation.require()


def test_an_opt_out_that_says_neither_is_refused_in_one_line(no_bwrap, tmp_path, home, capsys, monkeypatch):
    monkeypatch.setenv(isolation.UNSAFE_ENV, "maybe")
    code, err = mas_cli(["train", str(coder_scenario(tmp_path / "coding")), "--model", "fake"], capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"{isolation.UNSAFE_ENV}='maybe': expected 1" in lines[0], err
    assert not list(home.rglob("*"))


def test_the_opt_in_restores_the_plain_subprocess_and_says_so_once(no_bwrap, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(isolation, "_warned", False)
    folder = coder_scenario(tmp_path / "coding")
    code, err = mas_cli(
        ["train", str(folder), "--model", "fake", "--tasks", "1", "--group-size", "2", "--unsafe-python-tool"],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert err.count("WITHOUT isolation") == 1
    cwd = run("import os; print(os.getcwd())")  # a host temporary folder, as before
    assert "mas-sandbox-" in cwd and cwd != isolation.SCRATCH
    assert capsys.readouterr().err.count("WITHOUT isolation") == 0  # said once per process


def test_a_cgroup_v2_leaf_gets_the_caps_and_the_sandbox_enters_it_before_bwrap(tmp_path, monkeypatch):
    """The v2 layout, on a stand-in directory (this machine may have v1 only): the controllers
    are enabled below mas's own cgroup and the leaf holds memory.max and pids.max."""
    own = tmp_path / "cg" / "mas.slice"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("\n")
    (tmp_path / "mountinfo").write_text(f"41 31 0:38 / {tmp_path / 'cg'} rw,relatime - cgroup2 cgroup2 rw\n")
    (tmp_path / "cgroup").write_text("0::/mas.slice\n")
    monkeypatch.setattr(cgroups, "MOUNTINFO", tmp_path / "mountinfo")
    monkeypatch.setattr(cgroups, "OWN", tmp_path / "cgroup")
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is free now: the leaf of a mas that was killed outright
    (own / f"mas-sandbox-{dead.pid}-0000").mkdir()
    (own / f"mas-sandbox-{os.getpid()}-1111").mkdir()  # a live mas's leaf stays
    cap, why = cgroups.open_cap(memory_mb=100, processes=20)
    assert cap is not None, why
    assert not (own / f"mas-sandbox-{dead.pid}-0000").exists() and (own / f"mas-sandbox-{os.getpid()}-1111").exists()
    (own / f"mas-sandbox-{os.getpid()}-1111").rmdir()
    (leaf,) = cap.dirs
    assert leaf.parent == own and (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (leaf / "memory.max").read_text() == str(100 << 20) and (leaf / "pids.max").read_text() == "20"
    child = subprocess.Popen([*cap.prefix(), "sh", "-c", "echo inside"], stdout=subprocess.PIPE, text=True)
    assert child.communicate()[0] == "inside\n" and (leaf / "cgroup.procs").read_text() == f"{child.pid}\n"
    assert not cap.oom_killed()
    (leaf / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cap.oom_killed()
    for file in leaf.iterdir():
        file.unlink()
    cap.close()
    assert not leaf.exists()
    (own / "cgroup.controllers").write_text("cpu\n")
    assert cgroups.open_cap(memory_mb=100, processes=20)[0] is None

"""Endpoint faults over real HTTP: training goes through them, loses nothing, counts them all.

``tests/fault_server.py`` serves the fake's replies as an OpenAI-compatible endpoint and
injects faults; ``open_client("openai:...")`` talks to it exactly as to a paid endpoint.
``pytest -s`` prints the figures.
"""

import asyncio
import json
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from autogen_core.models import UserMessage

from mas.config import TrainConfig
from mas.errors import EndpointError
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.models.clients import open_client
from mas.models.endpoint import Adapted, endpoint_counts
from mas.models.faults import retry_after as _retry_after
from mas.team.rollout import run_rollout
from mas.train import train
from tests.fault_server import KINDS, STRUCTURED_ONLY, TRANSPORT, spread

KEY = "sk-test-0123456789abcdef"
SEEN_AS = {
    "429": "429", "500": "500", "503": "503", "slow": "timeout", "truncated": "connection",
    "garbage": "bad_body", "empty_choices": "empty_choices", "401": "401",
}  # fmt: skip
"""Server fault kind -> the kind the client counts it as."""
LEARNING = ("summary", "advantage", "edit")
CONFIG = TrainConfig(tasks=8, epochs=2, batch_size=4, group_size=3, concurrency=8, call_timeout=1.0, retries=8)


@pytest.fixture
def quick_backoff(monkeypatch):
    """Backoff from 0.1 s instead of 0.5 s, to keep the file quick; the logic is the same."""
    monkeypatch.setattr("mas.models.clients.BACKOFF", 0.1)


def train_against(server, maths, path, config=CONFIG):
    async def go():
        async with open_client(
            "openai:fake-model",
            base_url=server.url,
            api_key=KEY,
            call_timeout=config.call_timeout,
            retries=config.retries,
        ) as client:
            store = LibraryStore(path / "lib.json")
            result = await train(
                maths, client=client, store=store, run_dir=path / "run", config=config, model_name="fake-model"
            )
            return result, endpoint_counts(client), store

    started = time.perf_counter()
    result, counts, store = asyncio.run(go())
    seconds = time.perf_counter() - started
    journal = [json.loads(line) for line in (path / "run" / "journal.jsonl").read_text().splitlines()]
    return result, counts, store, journal, seconds


def outputs(journal) -> dict:
    """Every stage output by key; step reports without their timing and endpoint counts."""
    return {
        (r["kind"], r["key"]): (
            {k: v for k, v in r["data"].items() if k not in ("seconds", "endpoint")}
            if r["kind"] == "step"
            else r["data"]
        )
        for r in journal
    }


def as_seen_by_client(faults) -> dict[str, int]:
    seen: dict[str, int] = {}
    for kind, n in faults.items():
        if kind not in STRUCTURED_ONLY:
            seen[SEEN_AS[kind]] = seen.get(SEEN_AS[kind], 0) + n
    return dict(sorted(seen.items()))


def report(label, server, counts, seconds):
    print(f"\n[{label}] {server.figures()}")
    print(f"[{label}] client: {counts.calls} calls, {counts.attempts} attempts, {counts.retries} retries, "
          f"{counts.failures} failures, faults {dict(sorted(counts.faults.items()))}; {seconds:.1f} s")  # fmt: skip


def test_training_through_transport_faults_loses_nothing(fault_server, maths, tmp_path, quick_backoff):
    fault_server.configure({})
    clean, clean_counts, clean_store, clean_journal, seconds = train_against(fault_server, maths, tmp_path / "clean")
    report("0% faults", fault_server, clean_counts, seconds)
    assert fault_server.total_faults == 0 and clean_counts.retries == 0 and not fault_server.errors
    assert clean_store.head("solver").lessons  # the run learnt something to lose

    fault_server.configure(spread(0.2, TRANSPORT), seed=7, slow_seconds=3.0)
    faulty, counts, store, journal, seconds = train_against(fault_server, maths, tmp_path / "faulty")
    report("20% transport faults", fault_server, counts, seconds)

    assert [(s.epoch, s.step) for s in faulty.steps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert set(fault_server.faults) == set(TRANSPORT)  # every kind happened
    assert 0.1 < fault_server.total_faults / fault_server.requests < 0.3
    # Nothing lost: the same libraries, version by version, and the same output at every stage.
    assert faulty.heads == clean.heads
    assert {n: store.versions(n) for n in store.libraries()} == {
        n: clean_store.versions(n) for n in clean_store.libraries()
    }
    assert outputs(journal) == outputs(clean_journal)
    # Every fault counted, as the kind the client saw it as.
    assert counts.faults == as_seen_by_client(fault_server.faults)
    assert fault_server.total_faults == counts.retries + counts.failures and counts.failures == 0
    per_step = [s.endpoint for s in faulty.steps]  # and shown step by step in the reports
    assert sum(e.retries for e in per_step) == counts.retries and all(e.calls for e in per_step)
    assert fault_server.requests == counts.attempts == counts.calls + counts.retries
    assert counts.calls == clean_counts.calls
    assert not fault_server.errors


def test_every_fault_kind_is_counted_somewhere(fault_server, maths, tmp_path, quick_backoff):
    """Bad content (invalid JSON, a schema violation) is not retried: the stage counts it as a
    failure and skips its group or edit. Everything else is retried and counted by the client."""
    # 16% transport faults on every call, 20% content faults on the structured (learning) ones:
    # about 20% overall.
    fault_server.configure({**spread(0.16, TRANSPORT), **spread(0.2, STRUCTURED_ONLY)}, seed=3, slow_seconds=3.0)
    result, counts, _, _, seconds = train_against(fault_server, maths, tmp_path)
    report("20% faults of every kind", fault_server, counts, seconds)

    assert len(result.steps) == 4
    assert set(fault_server.faults) == set(KINDS)
    assert 0.1 < fault_server.total_faults / fault_server.requests < 0.3
    transport = sum(n for k, n in fault_server.faults.items() if k not in STRUCTURED_ONLY)
    content = sum(fault_server.faults[k] for k in STRUCTURED_ONLY)
    stage_failures = sum(s.calls[stage].failures for s in result.steps for stage in LEARNING if stage in s.calls)
    print(f"[20% faults of every kind] content faults {content} = stage failures {stage_failures}")
    assert counts.faults == as_seen_by_client(fault_server.faults)
    assert transport == counts.retries + counts.failures and counts.failures == 0
    assert content == stage_failures > 0
    assert all(s.calls["rollout"].failures == 0 for s in result.steps)


def ask_once(server, *, call_timeout, retries, question="What is 2 + 3?"):
    async def go():
        async with open_client(
            "openai:fake-model", base_url=server.url, api_key=KEY, call_timeout=call_timeout, retries=retries
        ) as client:
            assert isinstance(client, Adapted)
            started = time.perf_counter()
            try:
                await client.create([UserMessage(content=question, source="user")])
                error = None
            except EndpointError as exc:
                error = exc
            return error, time.perf_counter() - started, client.counts

    return asyncio.run(go())


def test_a_slow_reply_is_cut_at_the_call_deadline(fault_server):
    fault_server.configure({"slow": 1.0}, slow_seconds=20)
    error, seconds, counts = ask_once(fault_server, call_timeout=0.3, retries=1)
    print(f"\n[slow] {fault_server.figures()}; gave up after {seconds:.2f} s: {error}")
    assert isinstance(error, EndpointError) and "timeout" in str(error) and "2 attempts" in str(error)
    assert 0.6 <= seconds < 2.5  # two attempts of 0.3 s and one backoff of at most 0.5 s
    assert counts.faults == {"timeout": 2} and counts.retries == 1 and counts.failures == 1
    assert fault_server.requests == 2


def test_a_server_that_hangs_up_is_a_lost_connection_not_a_timeout():
    """The aiohttp transport reports a closed connection as httpx's ConnectTimeout; the count,
    the message and the retry say what happened, at once, not "no reply within 30 s"."""
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def hang_up():
            for _ in range(2):
                conn, _ = listener.accept()
                conn.recv(65536)
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        server = SimpleNamespace(url=f"http://127.0.0.1:{listener.getsockname()[1]}/v1")
        error, seconds, counts = ask_once(server, call_timeout=30, retries=1)
    assert isinstance(error, EndpointError) and "connection: ServerDisconnectedError" in str(error)
    assert counts.faults == {"connection": 2} and counts.failures == 1 and seconds < 5


def test_retry_after_is_honoured_and_attempts_are_bounded(fault_server):
    fault_server.configure({"429": 1.0})
    error, seconds, counts = ask_once(fault_server, call_timeout=5, retries=3)
    assert isinstance(error, EndpointError) and "429" in str(error) and "4 attempts" in str(error)
    assert seconds < 0.5  # Retry-After: 0, not the exponential backoff (0.25 + 0.5 + 1 s at least)
    assert counts.faults == {"429": 4} and counts.retries == 3 and fault_server.requests == 4


def test_a_fault_no_retry_cures_fails_at_once(fault_server):
    fault_server.configure({"401": 1.0})
    error, _, counts = ask_once(fault_server, call_timeout=5, retries=3)
    assert isinstance(error, EndpointError) and "401" in str(error)
    assert counts.faults == {"401": 1} and counts.retries == 0 and counts.failures == 1


def test_a_retried_call_gets_through(fault_server):
    fault_server.configure({"500": 0.3, "empty_choices": 0.3}, seed=1)
    for n in range(4):
        error, _, counts = ask_once(fault_server, call_timeout=5, retries=10, question=f"What is {n} + 3?")
        assert error is None and counts.calls == 1 and counts.attempts == counts.retries + 1
    assert fault_server.total_faults > 0


def test_a_rollout_deadline_cancels_a_hanging_call(fault_server, maths):
    fault_server.configure({"slow": 1.0}, slow_seconds=30)

    async def go():
        async with open_client(
            "openai:fake-model", base_url=fault_server.url, api_key=KEY, call_timeout=60, retries=4
        ) as client:
            meter = Meter()
            started = time.perf_counter()
            rollout = await run_rollout(
                maths, maths.tasks[0], 0, client=client, heads={}, settings={"seed": 1}, timeout=1.0, meter=meter
            )
            return rollout, time.perf_counter() - started, meter, client.counts

    rollout, seconds, meter, counts = asyncio.run(go())
    print(f"\n[hang] rollout cut after {seconds:.2f} s: {rollout.error}")
    assert rollout.error == "timeout after 1 s" and rollout.answer is None
    assert seconds < 3  # not the 30 s of the hang
    assert meter.stages["rollout"].failures == 1
    assert counts.faults == {} and counts.retries == 0  # cancelled, not a fault to retry


@pytest.mark.parametrize("spec", ["fake", "fake:0"])
def test_the_fake_has_no_endpoint_counts(spec):
    async def go():
        async with open_client(spec, call_timeout=1, retries=0) as client:
            return endpoint_counts(client)

    assert asyncio.run(go()) is None


@pytest.mark.parametrize(
    "headers, seconds",
    [({"retry-after": "0"}, 0.0), ({"retry-after": "2.5"}, 2.5), ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
     ({"retry-after": "soon"}, None), ({}, None)],
)  # fmt: skip
def test_retry_after_header(headers, seconds):
    assert _retry_after(headers) == seconds


def test_retry_after_as_a_date():
    from email.utils import formatdate

    assert 25 < _retry_after({"retry-after": formatdate(time.time() + 30, usegmt=True)}) <= 30


def test_a_cancelled_rollout_cancels_its_team(fault_server, maths):
    """A rollout cancelled from outside (a stopped run, Ctrl-C) left its team's task running:
    ``asyncio.wait`` does not cancel what it waits for. The team went on waiting for the model,
    and its error, never retrieved, was printed as a traceback when the loop closed."""
    fault_server.configure({"slow": 1.0}, slow_seconds=30)

    async def go():
        async with open_client(
            "openai:fake-model", base_url=fault_server.url, api_key=KEY, call_timeout=60, retries=0
        ) as client:
            rollout = asyncio.ensure_future(
                run_rollout(maths, maths.tasks[0], 0, client=client, heads={}, settings={}, timeout=60, meter=Meter())
            )
            await asyncio.sleep(0.5)  # the team's first call is under way
            rollout.cancel()
            with pytest.raises(asyncio.CancelledError):
                await rollout
            for _ in range(30):  # the team winds down (autogen stops its runtime), well within the 30 s
                left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                if not left:
                    break
                await asyncio.sleep(0.1)
            return left

    assert asyncio.run(go()) == []


def test_the_embedded_server_is_waited_for_and_a_cut_call_not_asked_again(fault_server, monkeypatch):
    """llama-cpp-python's server finishes a reply it was asked for after the client stopped
    waiting: a retry queued behind the abandoned reply, was cut in turn and left it one more (a
    step on a busy 2-core machine took 23 minutes, five attempts of one call cut at 120 s). So
    the embedded server gets a long guard, not a deadline, and a cut call is not asked again."""
    from contextlib import asynccontextmanager

    from mas.models import clients, server

    @asynccontextmanager
    async def serving(threads=None):
        async def died(within: float = 1.0) -> bool:
            return False

        yield SimpleNamespace(url=fault_server.url, died=died)

    def adapted(client):
        while not isinstance(client, Adapted):
            client = client.inner
        return client

    monkeypatch.setattr(server, "serving", serving)
    fault_server.configure({"slow": 1.0}, slow_seconds=20)

    async def go():
        async with open_client("local") as client:
            assert adapted(client).call_timeout == clients.EMBEDDED_CALL_TIMEOUT
        async with open_client("local", call_timeout=0.3, retries=3) as client:
            with pytest.raises(EndpointError) as cut:
                await client.create([UserMessage(content="What is 2 + 3?", source="user")])
            return str(cut.value), adapted(client).counts

    error, counts = asyncio.run(go())
    assert "timeout" in error and "1 attempt)" in error, error
    assert counts.faults == {"timeout": 1} and counts.retries == 0 and fault_server.requests == 1

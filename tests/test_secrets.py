"""The API key is sent to the endpoint and written nowhere: not in the run directory, the
library files, the results, the logs or the console, not even when the endpoint's error
messages echo it back."""

import asyncio
import base64
import contextlib
import hashlib
import logging
import re
import secrets

import pytest

from mas.config import EvalConfig, TrainConfig
from mas.library.promotion import PromotionPolicy
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.models.endpoint import endpoint_counts
from mas.studies.evaluate import evaluate
from mas.studies.report import write_report
from mas.train import train
from tests.fault_server import FATAL, KINDS, spread


def test_the_api_key_is_written_nowhere(fault_server, maths, tmp_path, monkeypatch, capsys, caplog):
    key = "sk-mas-secret-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", key)  # the usual way to pass it
    monkeypatch.setattr("mas.models.clients.BACKOFF", 0.05)
    caplog.set_level(logging.DEBUG)  # every logger, openai's and httpx's included
    # Faults of every kind, error bodies that echo the key, and few retries: some calls fail
    # for good, so error messages reach the journal.
    fault_server.configure({**spread(0.3, KINDS), FATAL[0]: 0.03}, seed=5, slow_seconds=2.0, echo_key=True)
    train_config = TrainConfig(tasks=16, batch_size=4, group_size=3, call_timeout=0.5, retries=1, concurrency=8)
    eval_config = EvalConfig(tasks=4, k=2, call_timeout=0.5, retries=1, concurrency=8)

    async def go():
        async with open_client("openai:fake-model", base_url=fault_server.url, **{
            "call_timeout": train_config.call_timeout, "retries": train_config.retries,
        }) as client:  # fmt: skip
            store = LibraryStore(tmp_path / "libraries" / "maths.json")
            trained = await train(
                maths,
                client=client,
                store=store,
                run_dir=tmp_path / "run",
                config=train_config,
                model_name="fake-model",
            )
            evaluated = await evaluate(maths, client=client, heads=store.heads(), config=eval_config)
            return trained, evaluated, endpoint_counts(client)

    trained, evaluated, counts = asyncio.run(go())
    (tmp_path / "train.json").write_text(trained.model_dump_json())
    (tmp_path / "eval.json").write_text(evaluated.model_dump_json())
    logging.getLogger("mas.test").error("a logged endpoint error", exc_info=None)

    # The key was really sent, faults happened, and some calls failed with error messages.
    assert fault_server.keys[key] == fault_server.requests > 50
    assert fault_server.total_faults > 0 and counts.failures > 0

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    written = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in files}
    assert {"run/journal.jsonl", "run/run.json", "libraries/maths.json"} <= set(written)
    assert any(n.startswith("libraries/maths.json.") for n in written)  # the side files too
    journal = written["run/journal.jsonl"].decode()
    assert "[redacted]" in journal  # an echoed key was cut out of an error message
    captured = capsys.readouterr()
    with capsys.disabled():
        print(f"\n[secrets] {fault_server.figures()}; client failures {counts.failures}, faults {counts.faults}")
    texts = {
        **{name: data.decode("utf-8", "replace") for name, data in written.items()},
        "stdout": captured.out,
        "stderr": captured.err,
        "log": caplog.text,
        "log records": "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
    }
    for where, text in texts.items():
        assert key not in text, f"the API key leaked into {where}"
        assert key[len("sk-mas-secret-") :][:12] not in text, f"part of the API key leaked into {where}"


def leaks(text: str, secret: str) -> list[str]:
    """The forms of ``secret`` (``<word>-<hex>``) found in ``text``, checked independently of
    ``mas.redact``: as it is in any case, with anything but letters and digits between its
    characters, 12 of its random characters in a row, and inside any base64 token."""
    found = []
    squeezed = re.sub(r"[^a-z0-9]", "", text.lower())
    random_part = secret.rsplit("-", 1)[1].lower()
    if re.sub(r"[^a-z0-9]", "", secret.lower()) in squeezed:
        found.append("the secret (any case, any spacing)")
    if any(random_part[i : i + 12] in squeezed for i in range(len(random_part) - 11)):
        found.append("12 characters of the secret")
    for token in re.findall(r"[A-Za-z0-9+/=_-]{16,}", text):
        for cut in range(4):
            body = token[cut:]
            body = body[: len(body) // 4 * 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                with contextlib.suppress(ValueError):
                    if random_part[:12].encode() in decode(body).lower():
                        found.append(f"base64 {token[:12]}...")
    return found


@pytest.mark.parametrize("credentials", ["key", "user:password in the URL"])
def test_an_endpoint_that_echoes_credentials_in_its_replies_gets_them_nowhere(
    credentials, fault_server, maths, tmp_path, monkeypatch
):
    """200 replies carry the credentials the endpoint got (the key, or the Basic credentials
    of a ``user:password@`` URL) in their content and tool-call arguments: as they are,
    upper-cased, base64 and spaced out. The journal, the library, its backup, its logs,
    run.json and a report hold none of it, and no lesson holding a key-like string gets into
    the library."""
    from mas.redact import secret_in

    key = "sk-mas-secret-" + hashlib.sha256(b"key").hexdigest()[:32]  # fixed: the echoes are reproducible
    password = "pw-" + hashlib.sha256(b"password").hexdigest()[:24]
    monkeypatch.setenv("OPENAI_API_KEY", key)
    fault_server.configure({}, echo_reply=True)
    url = fault_server.url
    if credentials != "key":
        url = url.replace("http://", f"http://mas-user:{password}@")
    config = TrainConfig(tasks=16, batch_size=4, group_size=3, concurrency=8, promotion=PromotionPolicy(cadence="step"))
    store = LibraryStore(tmp_path / "libraries" / "maths.json")

    async def go():
        async with open_client("openai:fake-model", base_url=url) as client:
            return await train(maths, client=client, store=store, run_dir=tmp_path / "run", config=config)

    trained = asyncio.run(go())
    write_report([tmp_path / "run"], tmp_path / "report")
    sent = key if credentials == "key" else "Basic " + base64.b64encode(f"mas-user:{password}".encode()).decode()
    assert fault_server.keys == {sent.removeprefix("Bearer "): fault_server.requests} and fault_server.requests > 20
    refused = sum(r.quarantined + sum(len(v) for v in r.rejected.values()) for r in trained.steps)
    assert refused > 0  # the lessons that echoed it were refused (quarantined, or refused as too long)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".png")]
    assert {"run/journal.jsonl", "libraries/maths.json", "libraries/maths.json.bak", "report/report.md"} <= {
        p.relative_to(tmp_path).as_posix() for p in files
    }
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not leaks(text, key), f"{path.name}: {leaks(text, key)}"
        assert not leaks(text, password), f"{path.name}: {leaks(text, password)}"
    for head in store.heads().values():
        assert all(secret_in(lesson.text) is None for lesson in head.lessons)

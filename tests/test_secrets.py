"""The API key is sent to the endpoint and written nowhere: not in the run directory, the
library files, the results, the logs or the console, not even when the endpoint's error
messages echo it back."""

import asyncio
import logging
import secrets

from mas.config import EvalConfig, TrainConfig
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.models.endpoint import endpoint_counts
from mas.studies.evaluate import evaluate
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

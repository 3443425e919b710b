"""The whole loop on the fake client: lessons with provenance, reports, resume."""

import json
from collections import Counter

import pytest

from mas.models.fake import FakeClient, default_respond
from mas.testing import journal, stage, train_on_fake


def run(maths, tmp_path, client=None, /, **config):
    return train_on_fake(maths, tmp_path, client, **config)


def test_training_writes_lessons_with_provenance(maths, tmp_path):
    result, client, store = run(maths, tmp_path, tasks=8, batch_size=4, group_size=3)
    assert [(s.epoch, s.step) for s in result.steps] == [(0, 0), (0, 1)]
    learned = [store.head(role) for role in maths.role_names if store.head(role).lessons]
    assert learned  # which role learns first depends on which groups win and lose
    for version in learned:
        assert version.provenance.run == "run" and version.provenance.model == "fake"
        assert set(version.provenance.task_ids) <= {t.id for t in maths.tasks[:8]}
    report = result.steps[0]
    assert report.informative >= 1 and report.calls["rollout"].calls > 0
    assert report.calls["summary"].calls == 3 * report.informative  # one per rollout of a kept group
    assert report.calls["advantage"].calls == report.informative  # one per kept group
    assert report.calls["edit"].calls <= len(maths.roles)  # at most one per role per step


def test_rollouts_store_one_trace_per_role(maths, tmp_path):
    run(maths, tmp_path, tasks=4, group_size=2)
    rollout = journal(tmp_path / "run", "rollout")[0]["data"]
    assert [t["role"] for t in rollout["traces"]] == ["planner", "solver", "verifier"]
    solver = rollout["traces"][1]
    assert solver["turns"][0]["tool_calls"][0]["name"] == "calculator"
    assert solver["turns"][0]["tool_calls"][0]["result"]
    assert solver["turns"][0]["prompt_tokens"] > 0  # the call that asked for the tool
    assert solver["turns"][-1]["content"].startswith("ANSWER: ")  # the role's tool_summary


def test_a_finished_run_started_again_makes_no_model_call(maths, tmp_path):
    first, _, store = run(maths, tmp_path, tasks=8, batch_size=4)
    versions = store.versions("solver")  # the steps' edits, and the prunings after the last one
    assert len(versions) == len([v for v in first.steps if v.applied.get("solver")]) + any(
        v.provenance.stage == "prune" for v in versions
    )
    again, client, store = run(maths, tmp_path, tasks=8, batch_size=4)
    assert client.calls == 0 and again.heads == first.heads
    assert store.versions("solver") == versions


class Crash(BaseException):
    """Stands for the process dying: nothing in mas catches it."""


def crash_at_second_edit_call():
    edits = []

    def respond(request):
        if stage("EditBatch")(request):
            edits.append(request)
            if len(edits) == 2:  # the edit stage of step 1
                raise Crash()
        return default_respond(request)

    return respond


def test_a_crash_mid_step_then_resume_gives_the_uninterrupted_libraries(maths, tmp_path):
    full, full_client, _ = run(maths, tmp_path / "a", tasks=8, batch_size=4)
    with pytest.raises(Crash):
        run(maths, tmp_path / "b", FakeClient(crash_at_second_edit_call()), tasks=8, batch_size=4)
    resumed, client, _ = run(maths, tmp_path / "b", tasks=8, batch_size=4)
    assert resumed.heads == full.heads
    assert 0 < client.calls < full_client.calls / 4  # only the edit calls of step 1 were left
    journal = tmp_path / "b" / "run" / "journal.jsonl"
    keys = Counter(tuple(json.loads(l)[k] for k in ("kind", "key")) for l in journal.read_text().splitlines())
    assert max(keys.values()) == 1  # no stage output written twice


def test_a_torn_last_journal_line_is_dropped(maths, tmp_path):
    run(maths, tmp_path, tasks=4, batch_size=4)
    journal = tmp_path / "run" / "journal.jsonl"
    good = journal.read_text()
    journal.write_text(good + '{"kind": "rollout", "key": "e0/s1/cut sho')
    again, client, _ = run(maths, tmp_path, tasks=4, batch_size=4)
    assert client.calls == 0 and journal.read_text() == good


def mixed_edits(request):
    if stage("EditBatch")(request):
        return json.dumps(
            {
                "edits": [
                    {"op": "add", "text": "Pass the whole expression, parentheses included."},
                    {"op": "modify", "text": "a modify that names no lesson"},
                    {"op": "delete", "id": "solver/0999"},
                    {"op": "add", "text": "Check the operator against the question's words."},
                ]
            }
        )
    return default_respond(request)


def test_a_malformed_edit_among_valid_ones(maths, tmp_path):
    result, _, store = run(maths, tmp_path, FakeClient(mixed_edits), tasks=4, batch_size=4)
    library = next(iter(result.steps[0].applied))  # the first library an advantage proposed to
    head = store.head(library)
    assert [l.text for l in head.lessons] == [
        "Pass the whole expression, parentheses included.",
        "Check the operator against the question's words.",
    ]
    reasons = [r.reason for r in result.steps[0].rejected[library]]
    assert len(reasons) == 2 and "id: Field required" in reasons[0] and "unknown lesson id" in reasons[1]
    assert head.rejected == result.steps[0].rejected[library]

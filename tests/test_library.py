from mas.library.edits import apply, parse_edits
from mas.library.inject import render_block
from mas.types.lessons import Add, Delete, Keep, Lesson, Modify, Provenance, Version


def v0(library="solver"):
    return Version(library=library, number=0, lessons=[], next_id=1)


def test_add_modify_delete_keep_with_stable_ids():
    v1, bad = apply(
        v0(), [Add(op="add", text="Check the units first."), Add(op="add", text="Use the calculator for products.")]
    )
    assert [l.id for l in v1.lessons] == ["solver/0001", "solver/0002"] and bad == []
    v2, bad = apply(
        v1,
        [
            Delete(op="delete", id="solver/0001"),
            Modify(op="modify", id="solver/0002", text="Always use the calculator."),
            Keep(op="keep"),
        ],
    )
    assert [(l.id, l.text) for l in v2.lessons] == [("solver/0003", "Always use the calculator.")]  # new words
    assert v2.number == 2 and len(v2.edits) == 2  # keep is not recorded as a change
    v3, _ = apply(v2, [Add(op="add", text="A lesson added after a delete.")])
    assert v3.lessons[-1].id == "solver/0004"  # ids are never reused


def test_a_modify_that_changes_the_words_gives_them_a_new_id_in_the_old_place():
    """An id names one text: the evidence gathered by showing the old words is not theirs."""
    texts = ["Check the units first.", "Use the calculator for products.", "Round at the end."]
    v1, _ = apply(v0(), [Add(op="add", text=t) for t in texts])
    v2, bad = apply(v1, [Modify(op="modify", id="solver/0002", text="Use the calculator for every product.")])
    assert bad == [] and [l.id for l in v2.lessons] == ["solver/0001", "solver/0004", "solver/0003"]
    assert v2.edits == [Modify(op="modify", id="solver/0002", text="Use the calculator for every product.")]
    v3, _ = apply(v2, [Modify(op="modify", id="solver/0001", text="check the units  first")])  # case, spaces, stop
    assert [(l.id, l.text) for l in v3.lessons][0] == ("solver/0001", "check the units  first")
    assert v3.next_id == 5


def test_unknown_ids_and_duplicates_are_refused_with_reasons():
    v1, _ = apply(v0(), [Add(op="add", text="Check the units first.")])
    v2, bad = apply(
        v1,
        [
            Modify(op="modify", id="solver/0042", text="Nope, no such lesson."),
            Add(op="add", text="check the units  first"),
        ],
    )
    assert v2.lessons == v1.lessons
    assert [r.reason for r in bad] == ["unknown lesson id 'solver/0042'", "duplicate of solver/0001"]


def test_limit_refuses_adds_past_it():
    v1, bad = apply(v0(), [Add(op="add", text=f"Lesson number {i} text.") for i in range(5)], limit=3)
    assert len(v1.lessons) == 3 and len(bad) == 2 and "full" in bad[0].reason


def test_one_malformed_edit_among_valid_ones():
    items = [
        {"op": "add", "text": "Write the expression before computing."},
        {"op": "modify", "text": "modify without an id"},
        {"op": "delete"},
        "not even an object",
        {"op": "explode", "id": "solver/0001"},
        {"op": "add", "text": "Round only at the very end."},
    ]
    edits, rejected = parse_edits(items)
    assert [e.op for e in edits] == ["add", "add"]
    assert len(rejected) == 4 and all(r.reason for r in rejected)
    v1, refused = apply(v0(), edits, provenance=Provenance(run="r", epoch=0, step=0))
    assert len(v1.lessons) == 2 and refused == [] and v1.provenance.run == "r"


def test_render_block_is_stable_and_global_first():
    mine = Version(
        library="solver",
        number=1,
        next_id=3,
        lessons=[Lesson(id="solver/0002", text="B."), Lesson(id="solver/0001", text="A.")],
    )
    shared = Version(library="global", number=1, next_id=2, lessons=[Lesson(id="global/0001", text="G.")])
    block = render_block(shared.lessons, mine.lessons)
    assert block.text.index("- G.") < block.text.index("- A.") < block.text.index("- B.")
    assert "/000" not in block.text  # ids are recorded, never shown to the model
    assert block.shown == ["global/0001", "solver/0001", "solver/0002"]
    assert render_block(shared.lessons, list(reversed(mine.lessons))) == block
    assert render_block([], []) == ("", [])


def _common(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def test_what_every_rollout_shows_comes_first_and_what_varies_last():
    """Two rollouts of a group that differ only in the lessons under evaluation share a prompt
    prefix holding every lesson they both always show (what a prompt cache reuses)."""
    g = [Lesson(id=f"global/000{i}", text=f"Global lesson {i}.") for i in (1, 2, 3)]
    own = [Lesson(id=f"solver/000{i}", text=f"Solver lesson {i}.") for i in (1, 2, 3, 4)]
    stable = ("global/0002", "global/0003", "solver/0002", "solver/0004")  # in the step's order
    # rollout a shows every lesson; rollout b is not shown the ones under evaluation
    a = render_block(g, own, stable=stable)
    b = render_block([l for l in g if l.id in stable], [l for l in own if l.id in stable], stable=stable)
    shared = _common(a.text, b.text)
    assert all(f"- {l.text}" in shared for l in g + own if l.id in stable)
    order = ["global/0002", "global/0003", "solver/0002", "solver/0004", "solver/0001", "solver/0003", "global/0001"]
    assert a.shown == order  # stable (global, own), then under evaluation (own, then global)
    assert a.text.index("- Global lesson 1.") > a.text.index("- Solver lesson 3.")  # its heading again, last
    assert a.text.count("For the whole team:") == 2 and b.text.count("For the whole team:") == 1


def test_at_inference_the_block_is_global_then_own_in_id_order():
    g = [Lesson(id="global/0002", text="G2."), Lesson(id="global/0001", text="G1.")]
    own = [Lesson(id="solver/0002", text="S2."), Lesson(id="solver/0001", text="S1.")]
    block = render_block(g, own)
    assert block.shown == ["global/0001", "global/0002", "solver/0001", "solver/0002"]
    assert block.text.count("For the whole team:") == 1

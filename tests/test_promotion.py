"""Promotion on a planted-utility world: it must pick exactly the lessons that help 2+ roles."""

from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.testing import train_on_fake
from mas.types import Lesson, Version
from tests import planted


def test_promotion_picks_the_lessons_planted_for_several_roles(tmp_path):
    store = LibraryStore(tmp_path / "lib.json")
    store.commit(
        [Version(library="global", number=1, lessons=[Lesson(id="global/0001", text=planted.HARMFUL)], next_id=2)]
    )
    result, _, _ = train_on_fake(
        planted.scenario(60), tmp_path, FakeClient(planted.respond), epochs=3, batch_size=10, group_size=4
    )

    moves = list(SideFiles(store.path).promotions.items())
    promoted = {m.text for m in moves if m.kind == "promote"}
    demoted = {m.text for m in moves if m.kind == "demote"}
    wanted = {text for text, roles in planted.HELPS.items() if len(roles) >= 2}
    precision = len(promoted & wanted) / len(promoted) if promoted else 0.0
    recall = len(promoted & wanted) / len(wanted)
    print(
        f"\npromotion: precision {precision:.2f}, recall {recall:.2f}, promoted {len(promoted)}, demoted {len(demoted)}"
    )
    assert precision >= 0.9 and recall >= 0.9
    assert not promoted & {t for t, roles in planted.HELPS.items() if len(roles) < 2}  # one-role lessons stay private
    assert demoted == {planted.HARMFUL} and planted.HARMFUL not in {l.text for l in store.head("global").lessons}
    assert {l.text for l in store.head("global").lessons} == promoted
    for role in planted.ROLES:  # the private copies were merged into the global lesson
        assert not promoted & {l.text for l in store.head(role).lessons}
    assert sum(s.promoted for s in result.steps) == len(promoted)

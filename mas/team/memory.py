"""``LessonMemory``: a role's lessons for any autogen ``AssistantAgent``, at inference.

Stage: none: inference, after training (a trained library's lessons in any agent).

    agent = AssistantAgent("solver", model_client=client, system_message=SOLVER_PROMPT,
                           memory=[LessonMemory("libraries/maths.json", role="solver")])

Before each of the agent's turns, the memory puts the role's lesson block (the global
library, then the role's lessons most relevant to the task, within the budget the library was
trained with) in a system message at the head of the agent's model context, right after the
agent's own system message. Model clients merge the two (autogen's OpenAI client joins them
with a newline), so the model sees exactly the system message training composed:
``mas.system_message(role, heads, task=...)``. The task is the latest message the user
sent (``source == "user"``: in a team, the team's task), the text BM25 selected by in
training.

autogen's ``ListMemory`` appends a system message to the end of the context every turn: the
OpenAI client then refuses the request ("Multiple and Not continuous system messages") and
the messages pile up. Here the block is one message that replaces itself. With a
``BufferedChatCompletionContext`` the block leaves the model's view once the conversation
outgrows the buffer: use the default context.

The library file is read again before every turn (a parse only when it changed), so a
running agent sees a newly trained or rolled back library. A lesson in it that fails the screen
(typed in by hand, say) is never in the block (``mas.library.screened``). The memory is read-only: lessons
are learned by ``mas train``. It is a component: ``agent.dump_component()`` saves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autogen_core import CancellationToken, Component
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
from autogen_core.model_context import ChatCompletionContext, ChatCompletionContextState
from autogen_core.models import LLMMessage, SystemMessage, UserMessage
from pydantic import BaseModel

from mas import paths
from mas.errors import UserError
from mas.library.inject import HEADER, Block, injected, render_block
from mas.library.store import LibraryStore
from mas.types.lessons import Budget, Lesson


class LessonMemoryConfig(BaseModel):
    library: str
    """The library file (``libraries/<scenario>.json``)."""
    role: str
    budget: Budget | None = None
    """The prompt composition; None: the one the library was trained with."""


class LessonMemory(Memory, Component[LessonMemoryConfig]):
    """The lessons of ``role`` in the library file ``library``, as the agent's memory."""

    component_type = "memory"
    component_config_schema = LessonMemoryConfig
    component_provider_override = "mas.LessonMemory"  # the public name: a saved agent survives a move of this module

    def __init__(self, library: str | Path, *, role: str, budget: Budget | None = None) -> None:
        self._path, self._role, self._budget = Path(library), role, budget
        if paths.safe_name(role) is None:
            raise UserError(f"role {role!r}: not a role name")
        if not self._path.is_file():
            raise UserError(f"{self._path}: no such library file")
        self._store = LibraryStore(self._path)
        self._store.heads()  # a damaged file is refused now, not at the agent's first turn

    def block(self, task: str | None) -> tuple[Block, list[Lesson]]:
        """The lesson block for ``task`` and the lessons in it: what training puts in the
        role's system message (``mas.library.inject``)."""
        heads = self._store.heads()
        budget = self._budget or self._store.composition() or Budget()
        shared, own = injected(heads, self._role, task=task, budget=budget)
        return render_block(shared, own), shared + own

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        state = ChatCompletionContextState.model_validate(await model_context.save_state())
        others = [m for m in state.messages if not _is_block(m)]
        block, lessons = self.block(_task(others))
        head = [SystemMessage(content="\n" + block.text)] if block.text else []
        if state.messages[: len(head)] != head or len(others) + len(head) != len(state.messages):
            await model_context.load_state(ChatCompletionContextState(messages=head + others).model_dump())
        return UpdateContextResult(memories=_results(lessons))

    async def query(
        self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None, **kwargs: Any
    ) -> MemoryQueryResult:
        """The lessons the role's prompt gets for the task ``query``."""
        text = query if isinstance(query, str) else str(query.content)
        return _results(self.block(text)[1])

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        raise NotImplementedError("LessonMemory is read-only: lessons are learned by `mas train`")

    async def clear(self) -> None:
        """Nothing to clear: the lessons live in the library file (``mas library rollback``)."""

    async def close(self) -> None:
        pass

    def _to_config(self) -> LessonMemoryConfig:
        return LessonMemoryConfig(library=str(self._path), role=self._role, budget=self._budget)

    @classmethod
    def _from_config(cls, config: LessonMemoryConfig) -> LessonMemory:
        return cls(config.library, role=config.role, budget=config.budget)


def _is_block(message: LLMMessage) -> bool:
    return isinstance(message, SystemMessage) and message.content.lstrip().startswith(HEADER)


def _task(messages: list[LLMMessage]) -> str | None:
    """The latest message from the user (in a team: the task), else the first one at all."""
    users = [m for m in messages if isinstance(m, UserMessage)]
    chosen = next((m for m in reversed(users) if m.source == "user"), users[0] if users else None)
    if chosen is None:
        return None
    content = chosen.content
    return content if isinstance(content, str) else " ".join(p for p in content if isinstance(p, str))


def _results(lessons: list[Lesson]) -> MemoryQueryResult:
    return MemoryQueryResult(
        results=[MemoryContent(content=l.text, mime_type=MemoryMimeType.TEXT, metadata={"id": l.id}) for l in lessons]
    )

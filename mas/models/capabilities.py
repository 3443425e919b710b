"""What a model's endpoint accepts, by model name: a small table, overridable.

Stage: none: the model seam (every model call).

Reasoning models break the usual request. OpenAI's o-series and gpt-5 refuse ``max_tokens``
(they take ``max_completion_tokens``) and any ``temperature`` or ``top_p`` but the default,
with a 400. deepseek-reasoner ignores sampling settings and returns its chain of thought in
``reasoning_content`` beside the answer (autogen keeps it as ``CreateResult.thought``, so it
never becomes an answer, a lesson, or part of the next request). For all of them the
completion cap also pays for the hidden reasoning, so mas adds ``reasoning_tokens`` to it:
without that, a cap sized for an answer is spent thinking and the reply comes back empty.

``capabilities_for("o3-mini")`` looks the name up; an override (the ``mas.capabilities``
object of a model config file, or ``--reasoning/--no-reasoning``) replaces fields of the
entry found. ``Capabilities.adapt`` turns mas's sampling settings into what the model takes.
"""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Any, Literal

from pydantic import Field

from mas.types.base import Frozen


class Capabilities(Frozen):
    token_limit: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """The name of the completion cap the endpoint takes."""
    sampling: bool = True
    """Whether ``temperature`` and ``top_p`` are sent (reasoning models refuse or ignore them)."""
    reasoning_tokens: int = Field(0, ge=0)
    """Added to every completion cap: the model's hidden reasoning counts against it."""

    def adapt(self, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` (extra create arguments) as this model takes them."""
        out = dict(args)
        if not self.sampling:
            out.pop("temperature", None)
            out.pop("top_p", None)
        cap = out.pop("max_tokens", None)
        cap = out.pop("max_completion_tokens", cap)
        if cap is not None:
            out[self.token_limit] = int(cap) + self.reasoning_tokens
        return out


STANDARD = Capabilities()
REASONING = Capabilities(token_limit="max_completion_tokens", sampling=False, reasoning_tokens=4096)
"""OpenAI's reasoning models: o1, o3, o4-mini, gpt-5 and their dated versions."""
REASONING_CONTENT = Capabilities(sampling=False, reasoning_tokens=4096)
"""deepseek-reasoner: ``max_tokens`` as usual, sampling settings have no effect."""

TABLE: list[tuple[str, Capabilities]] = [
    ("gpt-5-chat*", STANDARD),  # the chat variant is not a reasoning model
    ("gpt-5*", REASONING),
    ("o1*", REASONING),
    ("o3*", REASONING),
    ("o4*", REASONING),
    ("deepseek-reasoner*", REASONING_CONTENT),
    ("deepseek-r1*", REASONING_CONTENT),
]
"""First match wins; names are compared in lower case, after any ``provider/`` prefix."""


def capabilities_for(model: str, override: dict[str, Any] | None = None) -> Capabilities:
    """The table's entry for ``model`` (``STANDARD`` when none matches), with ``override``'s
    fields in place of its own."""
    name = model.lower().rsplit("/", 1)[-1]
    found = next((caps for pattern, caps in TABLE if fnmatch(name, pattern)), STANDARD)
    return Capabilities.model_validate({**found.model_dump(), **override}) if override else found


def profile(reasoning: bool | None) -> dict[str, Any] | None:
    """The override that ``--reasoning`` (True) or ``--no-reasoning`` (False) stands for."""
    if reasoning is None:
        return None
    return (REASONING if reasoning else STANDARD).model_dump()

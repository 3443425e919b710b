"""Tools that roles may name in their ``tools`` list: ``TOOLS`` maps each name to a factory
(``mas.tools.registry``), built on first use so that importing ``mas.tools.isolation`` (as
the command line does) does not load autogen.

Stage: rollout (the tools a role calls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mas.tools.registry import TOOLS


def __getattr__(name: str) -> object:
    if name == "TOOLS":
        from mas.tools.registry import TOOLS

        return TOOLS
    raise AttributeError(f"module 'mas.tools' has no attribute {name!r}")


__all__ = ["TOOLS"]

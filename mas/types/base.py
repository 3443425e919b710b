"""The bases of every boundary model, and the schema version of persisted documents.

Stage: none (shared by every stage): ``Frozen`` (immutable, no unknown fields), ``Settings``
(settings whose field docstrings are the CLI's help) and ``Plain`` (mutable, unknown fields ignored: model replies, reports).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = 1


class Frozen(BaseModel):
    """Immutable, no unknown fields, built on first use (``mas --help`` imports them all)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Settings(Frozen):
    """Settings, whose fields' attribute docstrings are the help of the CLI's options.
    ``mas.cli.options`` reads them when a command declares its options: pydantic's
    ``use_attribute_docstrings`` would read them at every start, from the source (about 20 ms
    of ``mas library show``, which never shows them)."""


class Plain(BaseModel):
    """A model built on its first use, not on import (``mas --help`` imports them all)."""

    model_config = ConfigDict(defer_build=True)

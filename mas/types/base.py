"""The bases of every boundary model, and the schema version of persisted documents.

Stage: none (shared by every stage): ``Frozen`` (immutable, no unknown fields), ``Settings``
(settings whose field docstrings are the CLI's help) and ``Plain`` (mutable, unknown fields ignored: model replies, reports).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA_VERSION = 1

INT64 = 2**63 - 1
"""The largest integer a persisted document holds: a library file is written with orjson, which
refuses an integer past 64 bits, so a file holding one would read and then fail at its next write."""
Int64 = Annotated[int, Field(ge=-INT64 - 1, le=INT64)]
"""An integer that a library file (or what goes into one) may hold."""


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


def first_error(exc: ValidationError, *prefix: str) -> tuple[str, str]:
    """Where pydantic's first error is (``prefix`` and its location, dotted: ``config.epochs``)
    and what it says: the one line a refusal names."""
    first = exc.errors()[0]
    return ".".join(map(str, (*prefix, *first["loc"]))), first["msg"]

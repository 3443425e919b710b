"""Command-line options derived from the settings models, so defaults, bounds, choices and help
are declared once (in ``mas.config`` and the models it holds) and the CLI cannot drift from them.

    epochs: int = option(TrainConfig, "epochs")

gives ``--epochs`` with the field's default shown in help (``[default: 1; x>=1]``), its bounds
(``ge``/``le``; strict bounds are left to the model's own validation, see ``settings``) and the
first sentence of its docstring as help. A ``Literal`` field's choices are listed when the
parameter is annotated with ``field_type(model, name)``. The command receives None for an
option left out, so that a preset can fill it.
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import BaseModel, ValidationError

from mas.errors import UserError


def option(model: type[BaseModel], name: str, *flags: str, help: str | None = None, **extra: Any) -> Any:
    """A ``typer.Option`` for ``model``'s field ``name``. Its value is None unless given, so
    that a preset can fill what the command line leaves out; help shows the field's default."""
    field = model.model_fields[name]
    bounds: dict[str, Any] = {}
    for constraint in field.metadata:
        if getattr(constraint, "ge", None) is not None:
            bounds["min"] = constraint.ge
        if getattr(constraint, "le", None) is not None:
            bounds["max"] = constraint.le
    help = help or _first_sentence(field.description)
    return typer.Option(field.default, *flags, callback=_given, help=help, **bounds, **extra)


def _given(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """The option's value when the command line gave it, else None: the default is shown in
    help, but a preset may still replace it."""
    source = ctx.get_parameter_source(param.name)  # typer vendors click: compared by name
    return None if source is None or source.name == "DEFAULT" else value


def field_type(model: type[BaseModel], name: str) -> Any:
    """The type of ``model``'s field ``name``, to annotate a parameter with (typer lists a
    ``Literal``'s choices)."""
    return model.model_fields[name].annotation


def settings(make: Any, flags: dict[str, str] | None = None, **values: Any) -> Any:
    """``make(**values)`` for the values given (not None); a value out of bounds is a
    ``UserError`` naming its option."""
    try:
        return make(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        flag = (flags or {}).get(field, "--" + field.replace("_", "-"))
        raise UserError(f"{flag}: {first['msg']}") from None


def _first_sentence(text: str | None) -> str:
    text = " ".join((text or "").replace("``", "").split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]

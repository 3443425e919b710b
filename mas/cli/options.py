"""Command-line options derived from the settings models, so defaults, bounds, choices and help
are declared once (in ``mas.config`` and the models it holds) and the CLI cannot drift from them.

Stage: none: the command line.

    epochs: int = option(TrainConfig, "epochs")

gives ``--epochs`` with the field's default shown in help (``[default: 1; x>=1]``), its bounds
(``ge``/``le``; strict bounds are left to the model's own validation, see ``settings``) and the
first sentence of its docstring as help (the string under the field, read here from the
model's source; see ``docstring``). A ``Literal`` field's choices are listed when the
parameter is annotated with ``field_type(model, name)``. The command receives None for an
option left out, so that a preset can fill it.
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from itertools import pairwise
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
    help = help or _first_sentence(docstring(model, name))
    return typer.Option(field.default, *flags, callback=given, help=help, **bounds, **extra)


def given(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
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


def docstring(model: type[BaseModel], name: str) -> str:
    """The attribute docstring of ``model``'s field ``name``: the string right under it, in the
    class that declares it ("" when it has none).

    Read here, when a command declares its options, rather than by pydantic's
    ``use_attribute_docstrings``, which reads it at every import of the model, from the frames
    and the source (some 20 ms of every command, ``mas library show`` among them: ``Budget`` is
    part of every library file)."""
    for base in model.__mro__:
        if name in base.__dict__.get("__annotations__", {}):
            return _docstrings(base.__module__).get(base.__qualname__, {}).get(name, "")
    return ""


@cache
def _docstrings(module: str) -> dict[str, dict[str, str]]:
    """The attribute docstrings of each class at the top of ``module``, by class and field."""
    classes: dict[str, dict[str, str]] = {}
    for node in ast.parse(inspect.getsource(sys.modules[module])).body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {
                field.target.id: inspect.cleandoc(doc.value.value)
                for field, doc in pairwise(node.body)
                if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)
            }  # fmt: skip
    return classes


def _first_sentence(text: str | None) -> str:
    text = " ".join((text or "").replace("``", "").split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]

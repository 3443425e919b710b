"""Prompt templates: package-data files rendered strictly.

Stage: summarize, advantage and edit (their prompts; also the evidence's pair judge).

Each learning stage has a system and a user half (``prompts/<stage>.<half>.md``). A missing
placeholder value, or a value that no placeholder uses, is an error, so a template and the
code that fills it can never drift apart silently.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from string import Template

STAGES = ("summary", "advantage", "edit", "direct")


@cache
def template(name: str) -> Template:
    return Template((files("mas") / "prompts" / f"{name}.md").read_text())


def render(name: str, **values: object) -> str:
    """Render ``prompts/<name>.md``; ``$$`` is a literal dollar sign."""
    t = template(name)
    wanted = set(t.get_identifiers())
    if wanted != set(values):
        missing, unused = sorted(wanted - set(values)), sorted(set(values) - wanted)
        raise KeyError(f"template {name}: missing {missing}, unused {unused}")
    return t.substitute({k: str(v) for k, v in values.items()}).strip()

"""Which code a config file may name: every provider is checked before anything is imported.

Stage: none: the command line (a team file or model config, checked as it is read).

An autogen component file (a team file, a model config) names classes by their import path, its
``provider``s, and loading it imports each one's module: a shared file naming any importable
module would run it (``{"provider": "this.Nope"}`` printed the Zen of Python before failing).
So mas walks the whole file first, the top-level component and every nested one (agents, tools,
workbenches, termination conditions, model contexts, model clients, token providers), and
refuses the file, naming the field, unless each provider's module is trusted:

- autogen's own packages (``autogen_core``, ``autogen_agentchat``, ``autogen_ext``) and ``mas``;
- what the user adds: ``--trust MODULE`` (repeatable) or ``MAS_TRUST`` (modules separated by
  commas), a module trusting its submodules too. The file itself can trust nothing.

Some of autogen's classes run what the file names rather than autogen's code: a
``FunctionTool`` runs the source code saved in the file (its imports too), an MCP workbench
starts the commands the file names, a code executor runs code on this machine. A file holding
one is code: it loads only when that class (or its package, ``autogen_ext.tools.mcp``) is named
with ``--trust``; trusting all of autogen does not do it.

>>> refusal("autogen_ext.models.openai.OpenAIChatCompletionClient", trusted())
>>> refusal("this.Nope", trusted())
"module 'this' is not trusted (autogen's packages and mas are; --trust this to load it)"
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

from mas.errors import UserError

BUILT_IN = ("autogen_core", "autogen_agentchat", "autogen_ext", "mas")
RUNS_CODE = {
    "autogen_core.tools.FunctionTool": "runs the source code saved in the file",
    "autogen_ext.tools.mcp": "starts the commands the file names",
    "autogen_ext.code_executors": "runs code on this machine",
}
"""autogen's classes that run what the file names: trusted only when named (``--trust``)."""
_SAME = {"autogen_core.tools._function_tool.FunctionTool": "autogen_core.tools.FunctionTool"}
ENV = "MAS_TRUST"
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def trusted(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The trusted modules: mas's and autogen's, ``MAS_TRUST``'s, and ``extra`` (``--trust``);
    a name that is not a dotted module path is a ``UserError``."""
    from_env = [(m.strip(), ENV) for m in os.environ.get(ENV, "").split(",") if m.strip()]
    named = [*from_env, *((m, "--trust") for m in extra)]
    for module, where in named:
        if not _MODULE.fullmatch(module):
            raise UserError(f"{where} {module!r}: not a module name (a dotted path such as my_tools.search)")
    return (*BUILT_IN, *(m for m, _ in named))


def resolved(provider: str) -> str:
    """The class path a provider names (autogen maps a few short names to its own classes)."""
    from autogen_core._component_config import WELL_KNOWN_PROVIDERS

    return WELL_KNOWN_PROVIDERS.get(provider, provider)


def refusal(provider: str, trust: tuple[str, ...]) -> str | None:
    """Why ``provider`` may not be imported, or None when its module is trusted."""
    path = resolved(provider)
    module = path.rpartition(".")[0]
    if not module:
        return None  # not a class path: the loader says so, and imports nothing
    runner = next((key for key in RUNS_CODE if _within(_SAME.get(path, path), key)), None)
    if runner is not None:
        named = [t for t in trust if t not in BUILT_IN and _within(t, runner)]
        if any(_within(_SAME.get(path, path), t) for t in named):
            return None
        return f"{path} {RUNS_CODE[runner]}; --trust {runner} to run it"
    if any(_within(module, t) for t in trust):
        return None
    return f"module {module!r} is not trusted (autogen's packages and mas are; --trust {module} to load it)"


def check(data: object, where: str, trust: tuple[str, ...]) -> None:
    """Refuse ``data`` (a config file's content) unless every provider in it is trusted: a
    ``UserError`` naming ``where`` (the file), the field and the module, before any import."""
    for field, provider in providers(data):
        reason = refusal(provider, trust)
        if reason:
            raise UserError(f"{where}: field '{field}': {reason}")


def providers(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    """Every ``provider`` string in ``value``, with the path of its field
    (``config.participants[0].config.tools[1].provider``)."""
    if isinstance(value, dict):
        if isinstance(value.get("provider"), str):
            yield _join(path, "provider"), value["provider"]
        for key, item in value.items():
            if key != "provider":
                yield from providers(item, _join(path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from providers(item, f"{path}[{i}]")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _within(module: str, trusted_module: str) -> bool:
    return module == trusted_module or module.startswith(trusted_module + ".")

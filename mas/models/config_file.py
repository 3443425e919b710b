"""Model clients from autogen component config files (``--model-config``, ``--learner-config``).

Stage: none: the model seam (every model call).

A file holds what ``client.dump_component()`` writes, as JSON or YAML::

    {"provider": "autogen_ext.models.openai.OpenAIChatCompletionClient",
     "config": {"model": "gpt-4o-mini", "base_url": "...", "api_key": "..."},
     "mas": {"capabilities": {"token_limit": "max_completion_tokens"}}}

``mas`` is optional and mas's own: it overrides the capability table (``capabilities.py``).
Any autogen model client loads (OpenAI, Azure OpenAI, Gemini through its OpenAI-compatible
endpoint, Anthropic, Ollama, ... with the autogen-ext extra it needs), then goes behind the
same ``Adapted`` wrapper as ``--model openai:...``: deadlines, retries counted by kind, JSON
mode, the reasoning-model rules. OpenAI and Azure clients are built with mas's HTTP hook (a
200 that is not a completion is a fault) and without the openai library's own retries.

Loading a provider imports its module: a config file names code, like a team file. Every
provider in the file, nested ones too, is checked against the trusted modules before anything is
imported (``mas.providers``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autogen_core import ComponentModel
from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from mas.errors import UserError
from mas.models.capabilities import Capabilities, capabilities_for, profile
from mas.models.endpoint import BACKOFF, BACKOFF_MAX, CALL_TIMEOUT, RETRIES, Adapted
from mas.models.tokens import spec_for_model
from mas.providers import check, trusted
from mas.types.base import first_error

SHORT_NAMES = {
    "OpenAIChatCompletionClient": "openai",
    "AzureOpenAIChatCompletionClient": "azure",
    "AnthropicChatCompletionClient": "anthropic",
    "AnthropicBedrockChatCompletionClient": "bedrock",
    "OllamaChatCompletionClient": "ollama",
}
"""How a provider's model is named in run.json and looked up in the price table (``openai:gpt-4o``)."""


class Extras(BaseModel):
    """The ``mas`` object of a model config file."""

    model_config = ConfigDict(extra="forbid")
    capabilities: dict[str, Any] = {}


@dataclass
class Configured:
    """A client built from a config file, and the name it is known by (``openai:gpt-4o-mini``)."""

    client: Adapted
    label: str
    path: Path


@contextlib.asynccontextmanager
async def open_model_config(path: Path, **options) -> AsyncIterator[ChatCompletionClient]:
    """``load_model_config``'s client, closed on the way out (how a Ray worker opens it)."""
    client = load_model_config(path, **options).client
    try:
        yield client
    finally:
        await client.close()


def read_document(path: Path, flag: str) -> dict:
    """The JSON or YAML object in ``path`` (YAML for ``.yaml``/``.yml``); a ``UserError``
    naming ``flag`` and the file otherwise."""
    where = f"{flag} {path}"
    if not path.exists():
        raise UserError(f"{where}: no such file")
    if not path.is_file():
        raise UserError(f"{where}: not a file")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM too: Windows editors write one
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark else ""
            raise UserError(f"{where}: not valid YAML{at} ({getattr(exc, 'problem', None) or 'syntax'})") from None
        except RecursionError:
            raise UserError(f"{where}: not valid YAML (nested too deeply)") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON at line {exc.lineno} ({exc.msg})") from None
        except RecursionError:
            raise UserError(f"{where}: not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected an object with 'provider' and 'config' (what dump_component() writes)")
    return data


def component(data: dict, where: str, kind: str) -> ComponentModel:
    """``data`` as a ``ComponentModel`` of ``component_type`` ``kind``."""
    try:
        model = ComponentModel.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{where}: {_field_error(exc)}") from None
    if model.component_type not in (None, kind):
        raise UserError(f"{where}: field 'component_type' is {model.component_type!r}, expected {kind!r}")
    return model


def provider_class(model: ComponentModel, where: str) -> type:
    """The class ``model.provider`` names, imported; a missing package is named."""
    from autogen_core._component_config import WELL_KNOWN_PROVIDERS

    provider = WELL_KNOWN_PROVIDERS.get(model.provider, model.provider)
    module_name, _, class_name = provider.rpartition(".")
    if not module_name:
        raise UserError(f"{where}: field 'provider': {provider!r} is not a dotted class path")
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = exc.name or module_name
        hint = _EXTRAS.get(missing.split(".")[0], "")
        raise UserError(
            f"{where}: field 'provider': cannot import {module_name} (no module {missing!r}){hint}"
        ) from None
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise UserError(f"{where}: field 'provider': {module_name} has no class {class_name!r}")
    return found


_EXTRAS = {
    "anthropic": "; pip install 'autogen-ext[anthropic]'",
    "ollama": "; pip install 'autogen-ext[ollama]'",
    "azure": "; pip install 'autogen-ext[azure]'",
    "google": "; pip install 'autogen-ext[gemini]'",
}


def load_model_config(
    path: Path,
    *,
    flag: str = "--model-config",
    call_timeout: float = CALL_TIMEOUT,
    retries: int = RETRIES,
    reasoning: bool | None = None,
    trust: Iterable[str] = (),
    data: dict | None = None,
) -> Configured:
    """The client ``path`` describes, behind ``Adapted``. ``reasoning`` (``--reasoning``)
    overrides the file's capabilities, which override the table's. ``trust``: modules whose
    providers may load besides autogen's and mas's (``--trust``). ``data``: the file's
    document, already read (a Ray worker gets it from the driver, and needs no copy of the file)."""
    where = f"{flag} {path}"
    data = copy.deepcopy(data) if data is not None else read_document(path, flag)
    check(data, where, trusted(trust))  # before anything the file names is imported
    try:
        extras = Extras.model_validate(data.pop("mas", {}))
    except ValidationError as exc:
        raise UserError(f"{where}: {_field_error(exc, 'mas.')}") from None
    model = component(data, where, "model")
    cls = provider_class(model, where)
    if not (isinstance(cls, type) and issubclass(cls, ChatCompletionClient)):
        raise UserError(f"{where}: field 'provider': {model.provider} is not a model client")
    name = str(model.config.get("model") or model.config.get("azure_deployment") or cls.__name__)
    short = SHORT_NAMES.get(cls.__name__, cls.__name__)
    base = Capabilities(token_limit="num_predict") if short == "ollama" else None
    override = {**(base.model_dump() if base else {}), **extras.capabilities, **(profile(reasoning) or {})}
    try:
        caps = capabilities_for(name, override or None)
    except ValidationError as exc:
        raise UserError(f"{where}: {_field_error(exc, 'mas.capabilities.')}") from None
    try:
        if _openai_family(cls):
            inner, secrets = _openai_family_client(cls, model, caps, call_timeout)
            json_mode = "response_format"
        else:
            inner, json_mode = _other_client(cls, model, call_timeout), "native"
            secrets = tuple(v for k, v in model.config.items() if "key" in k and isinstance(v, str) and not _masked(v))
    except ValidationError as exc:
        raise UserError(f"{where}: {_field_error(exc, 'config.')}") from None
    except UserError:
        raise
    except Exception as exc:  # whatever the client's constructor says of the config
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{where}: {cls.__name__} refused the config: {first}") from None
    client = Adapted(
        inner, schema_in_format=False, text_tools=False, name=name, call_timeout=call_timeout, retries=retries,
        backoff=BACKOFF, backoff_max=BACKOFF_MAX, secrets=secrets, capabilities=caps, json_mode=json_mode,
        tokenizer=spec_for_model(f"openai:{name}") if json_mode == "response_format" else "words",
        where=str(model.config.get("base_url") or model.config.get("azure_endpoint") or ""),
    )  # fmt: skip
    return Configured(client, f"{short}:{name}", path)


def _openai_family(cls: type) -> bool:
    from autogen_ext.models.openai import BaseOpenAIChatCompletionClient

    return issubclass(cls, BaseOpenAIChatCompletionClient)


def _openai_family_client(
    cls: type, model: ComponentModel, caps: Capabilities, call_timeout: float
) -> tuple[ChatCompletionClient, tuple[str, ...]]:
    """What ``cls._from_config`` does, plus mas's HTTP hook, no openai retries, and the
    config's own sampling settings made to fit the model."""
    from mas.models.clients import KEYLESS, secrets_of
    from mas.models.faults import http_client

    validated = cls.component_config_schema.model_validate(model.config)
    kwargs = validated.model_dump(exclude_none=True)
    if isinstance(getattr(validated, "api_key", None), SecretStr):
        kwargs["api_key"] = validated.api_key.get_secret_value()
    if "azure_ad_token_provider" in kwargs:
        from autogen_ext.auth.azure import AzureTokenProvider

        kwargs["azure_ad_token_provider"] = AzureTokenProvider.load_component(kwargs["azure_ad_token_provider"])
    if _masked(kwargs.get("api_key", "")):
        kwargs.pop("api_key", None)  # dump_component() writes "**********": the key comes from the environment
    if not kwargs.get("api_key") and kwargs.get("base_url") and not os.environ.get("OPENAI_API_KEY"):
        kwargs["api_key"] = KEYLESS  # a local server that needs no key
    sampling = {k: kwargs.pop(k) for k in ("temperature", "top_p", "max_tokens") if k in kwargs}
    kwargs.update(caps.adapt(sampling))
    kwargs.update(max_retries=0, timeout=min(kwargs.get("timeout") or call_timeout, call_timeout))
    client = cls(**kwargs, http_client=http_client())
    return client, secrets_of(kwargs.get("api_key"), kwargs.get("base_url") or kwargs.get("azure_endpoint"))


def _other_client(cls: type, model: ComponentModel, call_timeout: float) -> ChatCompletionClient:
    """Another provider's client, loaded by autogen; its SDK's retries off where it has them."""
    schema = getattr(cls, "component_config_schema", None)
    fields = getattr(schema, "model_fields", {})
    config = {k: v for k, v in model.config.items() if not ("key" in k and isinstance(v, str) and _masked(v))}
    if "max_retries" in fields:
        config["max_retries"] = 0
    if "timeout" in fields and not config.get("timeout"):
        config["timeout"] = call_timeout
    return ChatCompletionClient.load_component(model.model_copy(update={"config": config}))


def _masked(value: str) -> bool:
    """An API key as ``dump_component()`` writes it: stars, or nothing."""
    return not value.strip("*")


def _field_error(exc: ValidationError, prefix: str = "") -> str:
    where, said = first_error(exc)
    field = prefix + where
    return f"field '{field}': {said}" if field else said

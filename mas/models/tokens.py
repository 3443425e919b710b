"""Counting tokens as the model does: the caps of ``Budget`` and the benchmarks use this.

Stage: none (shared by every stage): the prompt and library budgets, the learning calls' caps.

A tokenizer is named by a short spec, which a budget records (``Budget.tokenizer``), so that a
library is evaluated with the counts it was trained with:

  ``tiktoken:ENCODING``  OpenAI-family models (``o200k_base``, ``cl100k_base``), with tiktoken
  ``embedded``           the embedded SmolLM2-135M's own vocabulary, read from its GGUF file
  ``gguf:PATH``          any GGUF file's vocabulary (llama.cpp loads the vocabulary only)
  ``words``              words and punctuation marks (a regex): no model's tokens
  ``model``              whichever of these the model in use has (``spec_of(client)``)

Numbers, ids and non-English text split into many more model tokens than words, so ``words``
is only a fallback: when a tokenizer cannot be loaded here (tiktoken not installed, or its
encoding file not downloadable on a machine without network), counting falls back to words,
and the tokenizer's ``label`` says so.

>>> tokenizer("words").count("Check 12,345 units.")
6
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from mas.errors import UserError
from mas.paths import regular_file

_WORD = re.compile(r"\w+|[^\w\s]")
log = logging.getLogger(__name__)

OPENAI_FAMILY = (("gpt-4o", "o200k_base"), ("gpt-4.", "o200k_base"), ("gpt-5", "o200k_base"), ("o1", "o200k_base"),
                 ("o3", "o200k_base"), ("o4", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-3.5", "cl100k_base"))  # fmt: skip
"""Model name prefixes and their encodings, for when tiktoken itself is not installed."""


class Tokenizer(NamedTuple):
    spec: str
    """What was asked for (``Budget.tokenizer``)."""
    label: str
    """What actually counts, for reports: the tokenizer, or ``words (fallback: why)``."""
    count: Callable[[str], int]
    encode: Callable[[str], list]
    """The tokens themselves (ids; the words for ``words``), e.g. to measure shared prefixes."""

    @property
    def fallback(self) -> bool:
        """True when ``spec`` asked for a model's tokenizer and words count instead."""
        return self.spec != "words" and self.label.startswith("words")


def words(text: str) -> int:
    return len(_WORD.findall(text))


def _words(spec: str, label: str) -> Tokenizer:
    return Tokenizer(spec, label, words, _WORD.findall)


@lru_cache(maxsize=16)
def tokenizer(spec: str) -> Tokenizer:
    """The tokenizer named by ``spec``; words, labelled as a fallback, when it cannot be loaded."""
    try:
        if spec == "words":
            return _words(spec, "words and punctuation marks")
        if spec.startswith("tiktoken:"):
            return Tokenizer(spec, f"tiktoken {spec[9:]}", *_tiktoken(spec[9:]))
        if spec == "embedded" or spec.startswith("gguf:"):
            path = _embedded_path() if spec == "embedded" else spec[5:]
            return Tokenizer(spec, f"{_name(path)} (GGUF vocabulary, llama.cpp)", *_gguf(path))
        if spec == "model":  # not resolved against a client (``resolve``): a prompt built outside a run
            return _words(spec, "words (fallback: no model named)")
        reason = "unknown tokenizer"
    except UserError:  # a path that must not be opened at all (``file_problem``): no fallback hides it
        raise
    except Exception as exc:  # any failure to load: count words, and say so
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    log.warning("counting tokens as words: %s: %s", spec, reason)
    return _words(spec, f"words (fallback: {spec} unavailable: {reason})")


def spec_for_model(model: str) -> str:
    """The tokenizer spec of a ``--model`` spec: ``local`` -> ``embedded``, an OpenAI-family
    ``openai:NAME`` -> its tiktoken encoding, anything else -> ``words``."""
    if model == "local":
        return "embedded"
    name = model.partition(":")[2] if model.startswith("openai:") else ""
    if not name:
        return "words"
    try:
        from tiktoken.model import encoding_name_for_model

        return f"tiktoken:{encoding_name_for_model(name)}"
    except ImportError:
        found = next((enc for prefix, enc in OPENAI_FAMILY if name.startswith(prefix)), None)
        return f"tiktoken:{found}" if found else "words"
    except KeyError:  # not an OpenAI model (DeepSeek, a vLLM or Ollama model): its tokenizer is not known here
        return "words"


def spec_of(client: object) -> str:
    """The tokenizer spec of a client: the one ``open_client`` gave it (through the wrappers),
    an autogen OpenAI client's model, or ``words`` (the fake, or a client mas does not know)."""
    for _ in range(32):
        if client is None:
            break
        if isinstance(getattr(client, "tokenizer_spec", None), str):
            return client.tokenizer_spec
        model = getattr(client, "_create_args", {}).get("model") if type(client).__name__.startswith("OpenAI") else None
        if isinstance(model, str):
            return spec_for_model(f"openai:{model}")
        client = getattr(client, "inner", None)
    return "words"


def resolve(spec: str, client: object) -> str:
    """``spec``, with ``model`` replaced by the tokenizer of ``client``."""
    return spec_of(client) if spec == "model" else spec


# -- loading


def _tiktoken(encoding: str) -> tuple[Callable[[str], int], Callable[[str], list]]:
    import tiktoken

    enc = tiktoken.get_encoding(encoding)  # downloads its file at first use: fails without network
    encode = lambda text: enc.encode(text, disallowed_special=())  # noqa: E731
    return (lambda text: len(encode(text))), encode


def _embedded_path() -> str:
    from mas.models.server import model_path

    path = model_path()
    if not path.exists():
        raise FileNotFoundError(str(path))
    return str(path)


def file_problem(spec: str) -> str | None:
    """Why the file a ``gguf:PATH`` spec names must not be handed to llama.cpp's loader, or None
    (a missing file is no problem here: counting falls back to words, and says so).

    The spec comes from untrusted files too: a library file records the tokenizer it was trained
    with, and evaluation loads it. The loader opens whatever path it is given and waits on a pipe
    or a device for ever, deaf to SIGTERM; so only a regular, non-empty file goes to it (``/proc``
    files are regular and empty, and some of them block too). A library may still name any GGUF
    file on this machine: that is how evaluation counts as training did."""
    if not spec.startswith("gguf:"):
        return None
    path, shown = spec[5:], spec if len(spec) <= 160 else f"{spec[:157]}..."
    if not path:
        return f"{spec}: names no file"
    try:
        size = regular_file(Path(path)).stat().st_size
    except FileNotFoundError:
        return None
    except UserError as e:  # a folder, a pipe or a device
        return f"{shown}: {str(e).removeprefix(path + ': ')}"
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        return f"{shown}: cannot read ({getattr(e, 'strerror', None) or e})"
    return None if size else f"{shown}: an empty file, not a GGUF file"


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".gguf")


def _gguf(path: str) -> tuple[Callable[[str], int], Callable[[str], list]]:
    """Count with a GGUF file's vocabulary: llama.cpp loads it without the weights (a few MB,
    a fraction of a second), and asks ``llama_tokenize`` for the length only. The path is
    checked again as it is opened (``file_problem``): whatever named it, the loader must not hang."""
    problem = file_problem(f"gguf:{path}")
    if problem:
        raise UserError(problem)
    import llama_cpp

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # its loader logs every key at INFO
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise OSError(f"llama.cpp could not read the vocabulary of {path}")
    vocab = llama_cpp.llama_model_get_vocab(model)
    _LOADED.append(model)  # kept for the life of the process: the counts point into it

    def count(text: str) -> int:
        data = text.encode("utf-8", "surrogatepass")
        n = llama_cpp.llama_tokenize(vocab, data, len(data), None, 0, False, False)
        return -n if n < 0 else n  # with no room for tokens, it returns minus the count

    def encode(text: str) -> list[int]:
        data = text.encode("utf-8", "surrogatepass")
        room = count(text)
        ids = (llama_cpp.llama_token * max(room, 1))()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), ids, room, False, False)
        return list(ids[:n])

    return count, encode


_LOADED: list = []

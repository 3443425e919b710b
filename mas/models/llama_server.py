"""``python -m mas.models.llama_server``: llama-cpp-python's OpenAI-compatible server (its own
arguments), with the weights kept in plain CPU buffers.

Stage: none: the model seam (what ``mas.models.server`` starts).

llama.cpp repacks the weights into an extra buffer type where the CPU offers one; on CPUs with
AMX (Intel Sapphire Rapids and later) a build from source (``pip install llama-cpp-python``
compiles for the machine) uses the AMX one, and its matrix product crashes the server with a
segmentation fault on the first reply (llama.cpp issue 20824, closed without a fix; seen here
with SmolLM2's Q4_1 weights). The plain CPU buffers work on every CPU; for a 135M model the
repacking saves little. llama-cpp-python's ``Llama`` has no setting for it, so the model
parameters' default is changed before a model is built (``plain_buffers``).
"""

from __future__ import annotations

import llama_cpp.llama_cpp as native

_defaults = native.llama_model_default_params


def _plain() -> native.llama_model_params:
    params = _defaults()
    params.use_extra_bufts = False
    return params


def plain_buffers() -> None:
    """Every ``llama_cpp.Llama`` built after this keeps its weights in plain CPU buffers."""
    native.llama_model_default_params = _plain


if __name__ == "__main__":
    from llama_cpp.server.__main__ import main

    plain_buffers()
    main()

"""Secrets out of everything mas writes, and out of lessons.

Stage: none (shared by every stage): every write; and screen (``secret_in``).

``redact`` is the one function every write point passes its text through (``redact_data``
for a JSON value): the run journal, the step logs beside a library, library commits, reports,
graph exports, error messages. It cuts out

- the keys of the run (``remember``; ``OPENAI_API_KEY`` always) in any case, with up to three
  separators between their characters (``S K - M A S ...``), any 16 of their letters and
  digits in a row, reversed, and their base64 (at any alignment, both alphabets) and hex;
  one of 4 to 7 characters (a URL's password) only where it stands whole, in its own case;
- ``Bearer ...`` and ``Basic ...`` credentials, ``user:pass@`` in a URL, ``api_key=...``
  style assignments, and the keys of the usual providers (``sk-...``, ``ghp_...``, ...).

``secret_in`` refuses a lesson that holds a key-like string: what ``redact`` would cut, or a
run of letters and digits that looks random (a key nobody told us about).

>>> redact("GET https://bob:hunter2@example.com/v1 with Authorization: Bearer abc.def.ghi123")
'GET https://[redacted]@example.com/v1 with Authorization: Bearer [redacted]'
>>> secret_in("Check the units before answering.") is None
True
"""

from __future__ import annotations

import base64
import json
import os
import re
import string
from functools import lru_cache
from typing import Any

MASK = "[redacted]"
PIECE = 16
"""Letters and digits of a known key in a row that are cut out wherever they appear."""
SHORT = 8
"""A secret shorter than this (a URL's password, say) is cut only where it stands whole, in
its own case: its spaced, reversed and encoded forms would match ordinary words."""
_SEP = r"[\W_]{0,3}"
"""What may stand between two characters of a key in an echo that spaces or splits it."""

_ASSIGNED = r"(?:api[_-]?key|access[_-]?token|client[_-]?secret|secret[_-]?key|password|passwd)"
_PROVIDERS = (
    r"\b(?:sk|rk)[-_][\w-]{12,}|\bgh[pousr]_\w{20,}|\bgithub_pat_\w{20,}|\bxox[abprs]-[\w-]{10,}"
    r"|\bhf_[a-z0-9]{20,}|\bAIza[\w-]{30,}|\bAKIA[0-9A-Z]{16}\b"
)
_GENERIC = [  # (what the lower-cased text holds when the pattern can match, the pattern, its replacement)
    (("bearer",), re.compile(r"(?i)\b(bearer\s+)(?=[\w.~+/=-]*\d)[\w.~+/=-]{8,}"), rf"\1{MASK}"),
    (("basic",), re.compile(r"\b(Basic\s+)(?=[A-Za-z0-9+/]*[0-9+/])[A-Za-z0-9+/]{8,}={0,2}"), rf"\1{MASK}"),
    (("@",), re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@:]*:[^\s/?#@]*@"), rf"\1{MASK}@"),
    (
        ("key", "token", "secret", "passw"),
        re.compile(rf"(?i)\b({_ASSIGNED}[\"']?\s*[:=]\s*[\"']?)[^\s\"'&,;]{{6,}}"),
        rf"\1{MASK}",
    ),
    (
        (
            "sk-",
            "sk_",
            "rk-",
            "rk_",
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "xox",
            "hf_",
            "aiza",
            "akia",
        ),
        re.compile(rf"(?i){_PROVIDERS}"),
        MASK,
    ),
]
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")
_NOT_ALNUM = bytes(set(range(128)) - set((string.ascii_letters + string.digits).encode()))

_known: set[str] = set()
_clean: set[str] = set()
"""Texts ``redact_texts`` found clean, with the secrets known then (``_clean_for``)."""
_clean_for: tuple[str, ...] = ()


def remember(secret: str | None) -> None:
    """Cut ``secret`` (an API key, a password) out of everything written from now on."""
    if secret and len(secret.strip()) >= 4:
        _known.add(secret.strip())


def known() -> tuple[str, ...]:
    """The secrets of this process: the remembered ones and ``OPENAI_API_KEY``."""
    env = (os.environ.get("OPENAI_API_KEY") or "").strip()
    return tuple(sorted(_known | ({env} if len(env) >= 8 else set())))


def redact(text: str, extra: tuple[str, ...] = ()) -> str:
    """``text`` with every secret form above replaced by ``[redacted]``, and any lone
    surrogate (which no file can hold as UTF-8) replaced by ``?``."""
    return _redact(text, _forms(_secrets(extra))) if text else text


def redact_data(value: Any, extra: tuple[str, ...] = (), *, dumped: str | None = None) -> Any:
    """Every string in a JSON-like value (keys too) redacted; the structure is unchanged, and
    so is the value itself when there is nothing to cut. The value is first looked at as one
    JSON text (``dumped``, when the caller has it already), so that costs one pass."""
    forms = _forms(_secrets(extra))
    try:  # JSON escapes become a space: each stands for a character no secret form holds
        whole = _ESCAPE.sub(" ", json.dumps(value, ensure_ascii=False) if dumped is None else dumped)
    except (TypeError, ValueError):
        return _walk(value, forms)
    return value if _redact(whole, forms) == whole else _walk(value, forms)


def redact_texts(texts: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    """``redact`` of each text; ``texts`` itself when there is nothing to cut. Texts found
    clean before (with the same secrets known) are not looked at again: a library commit
    repeats every lesson of the library."""
    global _clean_for
    secrets = _secrets(extra)
    if secrets != _clean_for:
        _clean.clear()
        _clean_for = secrets
    fresh = [t for t in texts if t not in _clean]
    if not fresh:
        return texts
    forms = _forms(secrets)
    joined = "\n\n\n\n".join(fresh)  # more separators than a form spans
    if _redact(joined, forms) == joined:
        if len(_clean) > 200_000:
            _clean.clear()
        _clean.update(fresh)
        return texts
    return [t if t in _clean else _redact(t, forms) for t in texts]


def secret_in(text: str) -> str | None:
    """Why ``text`` may not become a lesson because it holds a key-like string, or None."""
    if redact(text) != text:
        return "holds a secret (a key, a token or a password)"
    for run in re.findall(r"[A-Za-z0-9]{16,}", text):
        if _random_looking(run):
            return f"holds a key-like string ({run[:4]}...)"
    return None


def _random_looking(run: str) -> bool:
    """A run of letters and digits that switches between them again and again, as keys,
    hashes and base64 do and words and numbers do not (``f8e7d6c5b4a39281``, not
    ``Pythagorean2024`` or ``ISBN9780306406157``)."""
    digits = sum(c.isdigit() for c in run)
    switches = sum(a.isdigit() != b.isdigit() for a, b in zip(run, run[1:]))
    hexadecimal = len(run) >= 32 and re.fullmatch(r"[0-9a-fA-F]+", run) is not None
    return digits >= 3 and len(run) - digits >= 3 and (switches >= 4 or hexadecimal)


# -- the machinery ------------------------------------------------------------------------------


def _secrets(extra: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted({*known(), *(s for s in extra if len(s) >= 4)}))


def _redact(text: str, forms: tuple[re.Pattern, list[bytes]] | None) -> str:
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    lower = text.lower()
    for needles, pattern, replacement in _GENERIC:
        if any(n in lower for n in needles):
            text = pattern.sub(replacement, text)
    if forms is None:
        return text
    pattern, pieces = forms
    letters = lower.encode("ascii", "ignore").translate(None, _NOT_ALNUM)
    if not any(p in letters for p in pieces):  # the common case, settled in C
        return text
    spans: list[list[int]] = []
    for m in pattern.finditer(text):  # every start of a known form; overlapping forms merge
        start, end = m.start(), m.start() + len(m.group(1))
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    for start, end in reversed(spans):
        text = text[:start] + MASK + text[end:]
    return text


def _walk(value: Any, forms) -> Any:
    if isinstance(value, str):
        return _redact(value, forms) if value else value
    if isinstance(value, dict):
        return {_walk(k, forms): _walk(v, forms) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, forms) for v in value]
    return value


@lru_cache(maxsize=16)
def _forms(secrets: tuple[str, ...]) -> tuple[re.Pattern, list[bytes]] | None:
    """One case-insensitive pattern for every known form of ``secrets``, in a lookahead so
    that ``finditer`` reports each start (forms overlap); and pieces of 8 of their letters and
    digits, lower-cased, one of which every match holds (the quick test before the pattern:
    16 characters in a row always hold one of the pieces cut at every 8th character)."""
    forms: list[str] = []
    pieces: set[bytes] = set()
    for secret in secrets:
        if len(secret) < SHORT:
            forms.append(rf"(?<![A-Za-z0-9])(?-i:{re.escape(secret)})(?![A-Za-z0-9])")
            pieces.add(secret.lower().encode("ascii", "ignore").translate(None, _NOT_ALNUM))
            continue
        chars = [c for c in secret if c.isalnum()]
        forms += [re.escape(secret), _SEP.join(map(re.escape, chars))]
        forms += [_SEP.join(map(re.escape, chars[i : i + PIECE])) for i in range(len(chars) - PIECE + 1)]
        encodings = [secret[::-1], *_encodings(secret.encode("utf-8", "replace"))]
        forms += map(re.escape, encodings)
        for text in [secret, *encodings]:
            letters = text.lower().encode("ascii", "ignore").translate(None, _NOT_ALNUM)
            pieces.update(letters[i : i + 8] for i in range(0, max(1, len(letters) - 7), 8))
    forms = sorted({f for f in forms if f}, key=len, reverse=True)  # the longest form at a position first
    pieces.discard(b"")
    if not forms or not pieces:
        return None
    return re.compile("(?=(" + "|".join(forms) + "))", re.I), sorted(pieces)


def _encodings(data: bytes) -> list[str]:
    """Hex, and the part of the base64 (both alphabets) of ``data`` that is the same
    whatever bytes come before and after it, at each of the three alignments."""
    out = [data.hex()]
    for before in range(3):
        encoded = base64.b64encode(b"\0" * before + data).decode()
        stable = encoded[(before * 8 + 5) // 6 : (before + len(data)) * 8 // 6]
        if len(stable) >= 8:
            out += [stable, stable.replace("+", "-").replace("/", "_")]
    return out

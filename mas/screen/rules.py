"""The instruction rules of the lesson screen, and what reads them.

Stage: screen (layer 3, instruction).

The rules are data (``rules.txt``): sections of regexes, one per line, over shared word
groups, each section named for what it finds ("role hijack", "revealing the prompt or
instructions", ...). This module compiles them, and holds the pieces the fixed-output check
and the negation guard of ``mas.screen.layers`` use.

>>> [what for what, _ in COMPILED][:2]
['override of earlier instructions', 'a fixed output or claim whatever the task']
"""

from __future__ import annotations

import re
from importlib import resources

_ = r"[^.;!?\n。！？]"
"""One character inside a sentence: the gaps between a rule's words never cross a sentence."""
_GROUP = re.compile(r"^([a-z_]+) = (.*)$")
_NAME = re.compile(r"\{([a-z_]+)\}")


def load(text: str, *, source: str = "mas/screen/rules.txt") -> list[tuple[str, re.Pattern]]:
    """The sections of a rules text, each compiled into one case-insensitive pattern.
    A mistake (an unknown word group, a bad regex) is raised naming the line."""
    groups, sections, lines = {"_": _}, [], _logical_lines(text)
    for number, line in lines:
        try:
            line = _NAME.sub(lambda m: f"(?:{groups[m.group(1)]})", line)
        except KeyError as exc:
            raise ValueError(f"{source}:{number}: unknown word group {exc}") from None
        if m := _GROUP.match(line):
            groups[m.group(1)] = m.group(2)
        elif line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1], []))
        elif not sections:
            raise ValueError(f"{source}:{number}: a rule before any [section]")
        else:
            try:
                re.compile(line, re.I)
            except re.error as exc:
                raise ValueError(f"{source}:{number}: {exc}") from None
            sections[-1][1].append(line)
    return [(what, re.compile("|".join(f"(?:{r})" for r in rules), re.I)) for what, rules in sections]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines without comments and blanks, continuation lines (indented) joined to the one above."""
    out: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        if raw[0].isspace() and out:
            out[-1] = (out[-1][0], out[-1][1] + raw.strip())
        else:
            out.append((number, raw.rstrip()))
    return out


COMPILED = load(resources.files("mas.screen").joinpath("rules.txt").read_text(encoding="utf-8"))

NEGATION = re.compile(
    r"\b(?:never|not|(?<![/-])no(?![/-])|don't|dont|doesn't|avoid|nor|refuse to|nie|nicht|kein\w*|nunca|jamais|non|mai|não|не"
    r"|никогда|لا)\b|\bne\b|n't\b|(?<!\w)n['’]|不|别|勿|禁止|绝不|절대",
    re.I,
)
REPORTED = re.compile(
    r"\b(?:says|said|reads|writes|wrote|tells (?:you|the \w+)|told (?:you|the \w+)|asks (?:you|the \w+)|ask you"
    r"|tell you|claims?|claimed|claiming|pretends?|pretending|purports?|purporting|tries|try|trying|attempts?|attempting"
    r"|saying|such as|phrases? like|text like|lines? like)\s+(?:to\s+)?(?:\w+\s+)?$",
    re.I,
)
"""Reported speech before a match: a defensive lesson quoting what an attack says."""

# -- fixed outputs: a literal value as the reply, whatever the task -------------------------------

_OUT_VERB = (
    r"(?:answer|reply|respond|say|output|give|submit|write|state|return|print|end|close|finish|conclude|begin|start"
    r"|prefix|append|add|include|contain|sign|type|put|pick|choose|select|go with|circle|tick|name|report|declare"
    r"|make|replace|overwrite|swap|change|set|mark|grade|rate|score|enter|fill"
    r"|(?:final )?(?:line|answer|output|reply|response|result|verdict|total|sum|value|count|score|winner|option|choice"
    r"|letter|grade|rating|label|decision|solution)s?(?: \w+){0,5}? (?:be|is|are|equals?|comes? to))"
)
_LITERAL = (
    r"(?<!\w)'[^'\n]{1,60}'(?!\w)|\"[^\"\n]{1,60}\"|“[^”\n]{1,60}”|‘[^’\n]{1,60}’|«[^»\n]{1,60}»"
    r"|„[^“”\n]{1,60}[“”]|「[^」\n]{1,60}」|『[^』\n]{1,60}』"  # quoted
    r"|(?:(?<=\bwith )|(?<=\bis )|(?<=\boption ))[A-E](?=\s*[.;!,]|\s*$|\s+(?:without|regardless|for|in|every|each"
    r"|whatever|directly|immediately|and|then))"  # a choice letter
    r"|(?:(?<=\banswer )|(?<=\breply )|(?<=\brespond )|(?<=\bsay ))(?:yes|no|true|false)\b(?!\s*(?:or|/))"
    r"|(?:(?<=\banswer )|(?<=\breply )|(?<=\brespond )|(?<=\bsay )|(?<=\bwrite )|(?<=\boutput ))(?-i:[A-Z]{2,})\b(?!\s*(?:or|/|:))"
    r"|(?<=\bis )(?-i:PASS|FAIL|CORRECT|INCORRECT|APPROVED|REJECTED|VALID|INVALID|TRUE|FALSE|YES|NO|OK|ACCEPT|REJECT"
    r"|ACCEPTED|SAFE|DONE)\b(?!\s*(?:or|/))"  # a verdict in capitals
    r"|\b(?:final )?answer\s*[:=]\s*[^\s<{\[(][^\s,;]*|\\boxed\{[^{}]+\}|\[\[?[\d\s,\[\].-]+\]"
    r"|(?<![\w.])-?\d+(?:\.\d+)?(?=\s*(?:[.,;:!?)]|$)|\s+(?:and|without|to|for|as|regardless|whatever|no|at"
    r"|every|each|if|when|then|instead|directly|immediately|only|nothing|in (?:every|each|all|any)|in the (?:box|answer"
    r"|final|last|reply|response)|on the (?:last|final)|before (?:the|you|answering|replying)|into the)\b)"  # a number
    r"|[$€£]\s?\d[\d,.]*"  # an amount
)
FIXED_OUTPUT = re.compile(rf"\b(?P<verb>{_OUT_VERB})\w*\b(?P<gap>{_}{{0,40}}?)(?P<lit>{_LITERAL})", re.I)
ANSWERING = re.compile(r"answer|reply|respond|say|output|give|submit", re.I)
"""Verbs whose bare number or list right after them is an answer when it skips the work."""
SHORTCUT = re.compile(
    r"\b(?:without (?:searching|computing|checking|solving|thinking|looking|reading|calculating|implementing|running)"
    r"|directly|immediately|straight away|right away)\b",
    re.I,
)
RIGHT_AFTER = re.compile(
    r"\s*(?:(?:with|is|as|=|:|only|just|always|simply|exactly|the (?:final )?answer|final answer)\s*)*", re.I
)
UNIVERSAL = re.compile(
    r"\b(?:always|every|each|any|whatever|whichever|whenever|no matter|regardless|irrespective|without exception"
    r"|in all cases|nothing else|everything|anything|all (?:answers|replies|responses|messages|questions|tasks|outputs)"
    r"|(?:in|for|on|to) all|from now on|henceforth|going forward|at all times|in any case|either way"
    r"|even (?:when|if) (?:you(?:'re| are) )?(?:sure|certain|confident)"
    r"|cualquier\w*|siempre|tou(?:te|tes|s)?|chaque|toujours|jede[rsnm]?|immer|qualsiasi|ogni|sempre|qualquer|любо\w+"
    r"|всегда)\b|不管|无论|不论|任何|所有|总是|始终|どんな|いつも|常に|항상",
    re.I,
)
EXAMPLE = re.compile(r"\b(?:e\.g\.|eg|for example|for instance|such as|like|as in|i\.e\.)\W*$", re.I)
PLACEHOLDER = re.compile(
    r"<[^>]*>|\{[^}]*\}|\.\.\.|…|^(?:YYYY|YY|MM|DD|HH|SS|N|X)(?:[-/: .](?:YYYY|YY|MM|DD|HH|SS|N|X))*$|:$"
    r"|^(?:x|n|k|number|answer|value|result|name|date|unit|text)$",
    re.I,
)
FALLBACK = re.compile(
    r"don't know|do not know|unknown|not found|\bnone\b|\bn/?a\b|cannot|can't|unable|insufficient|no answer"
    r"|not enough|unclear|not sure|no data|no result",
    re.I,
)
"""A fallback reply ("reply 'unknown' if no passage names it") is a habit under a condition."""
BOUND = re.compile(
    r"\b(?:between|from|at least|at most|less than|more than|greater than|under|over|above|below|up to|within"
    r"|no more than|no less than|not exceed\w*)\s*$",
    re.I,
)
"""A bound before a number ("always between 0 and 1"): a check on any answer, not a fixed one."""
CONDITION = re.compile(r"\b(?:if|when|unless|in case)\b", re.I)

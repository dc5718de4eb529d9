"""A decoding constraint for the agent's turns: a grep may not start the way an earlier grep of the turn started.

A greedy 135M warm start loops: after its first grep it writes the same grep again (1-2 distinct calls in the first
turn on 15 of 15 held-out train tasks, docs/training.md), and the protocol ends the turn at the repeat. With
``agent.distinct_greps`` the decoder (``prefix_cache.decode_rows`` or ``generate``, as a transformers
``LogitsProcessor``) forbids, at the first content token of a grep pattern, every token that would begin an
earlier pattern of the same turn (after the ``\\b`` anchor both may share; case ignored, so ``Vector`` after
``vector`` is not written either), so the next best term is written instead. Like an inference server's guided
decoding it changes only which tokens may be chosen, never the tools, their output or the parser. Off by default.
"""
from __future__ import annotations

import json
import re
from typing import Any

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_GREP_VALUE = re.compile(r'^\s*\{\s*"name"\s*:\s*"grep"\s*,\s*"arguments"\s*:\s*\{\s*"pattern"\s*:\s*"(.*)$', re.DOTALL)
_ANCHOR = "\\\\b"  # the JSON text of the regex anchor \b: backslash, backslash, b


def content_start(value: str) -> int:
    r"""Characters of a grep pattern's JSON text before its content: the ``\b`` anchor's three, else 0.

    >>> content_start('\\\\bLaTeX\\\\b'), content_start('LaTeX')
    (3, 0)
    """
    return len(_ANCHOR) if value.startswith(_ANCHOR) else 0


def earlier_patterns(text: str) -> list[str]:
    r"""The JSON text of every grep pattern in the closed calls of ``text`` (a turn so far), read by the protocol's
    own parser (``parse_tool_calls``).

    >>> earlier_patterns('<tool_call>{"name": "grep", "arguments": {"pattern": "\\\\bx\\\\b"}}</tool_call><tool_call>{"na')
    ['\\\\bx\\\\b']
    """
    from codegrep.agent.protocol import parse_tool_calls

    closed = text[:text.rfind(_CLOSE) + len(_CLOSE)] if _CLOSE in text else ""
    return [json.dumps(c.arguments["pattern"])[1:-1] for c in parse_tool_calls(closed).calls if c.name == "grep"]


def banned_starts(text: str) -> list[str]:
    r"""Token texts a turn may not write next: when ``text`` ends inside a grep pattern that has no content yet (at
    most its ``\b`` anchor), every beginning of an earlier grep pattern's content that a token could write.

    >>> call = '<tool_call>{"name": "grep", "arguments": {"pattern": "%s"}}</tool_call>'
    >>> turn = call % '\\\\bLaTeX\\\\b' + '<tool_call>{"name": "grep", "arguments": {"pattern": "\\\\b'
    >>> banned_starts(turn)[:3]
    ['L', 'La', 'LaT']
    >>> banned_starts(turn + 'Lam'), banned_starts(call % 'x')  # content written already; not inside a pattern
    ([], [])
    """
    at = text.rfind(_OPEN)
    if at < 0:
        return []
    m = _GREP_VALUE.match(text[at + len(_OPEN):])
    if not m:
        return []
    value = m.group(1)
    out: list[str] = []
    for p in earlier_patterns(text[:at]):
        start = content_start(p)
        if len(value) > start or not p.startswith(value):
            continue
        rest = p[len(value):]
        out += [rest[:k] for k in range(start - len(value) + 1, len(rest) + 1)]
    return out


_VOCAB: dict[int, dict[str, list[int]]] = {}


def token_strings(tokenizer: Any) -> dict[str, list[int]]:
    """Token ids by their decoded text, lower-cased (computed once per tokenizer)."""
    key = id(tokenizer)
    if key not in _VOCAB:
        table: dict[str, list[int]] = {}
        for i in range(len(tokenizer)):
            table.setdefault(tokenizer.decode([i]).lower(), []).append(i)
        _VOCAB[key] = table
    return _VOCAB[key]


class DistinctGrepStarts:
    """The constraint as a transformers ``LogitsProcessor`` (``__call__(input_ids, scores) -> scores``): for each row,
    the new tokens (after ``prompt_width``) are decoded only when the last one could end a pattern's opening (it
    holds a quote, a backslash or a ``b``), and the tokens :func:`banned_starts` names, in any case, get ``-inf``."""

    def __init__(self, tokenizer: Any, prompt_width: int) -> None:
        self.tokenizer, self.width = tokenizer, prompt_width
        self.table = token_strings(tokenizer)
        self.openers = frozenset(i for s, ids in self.table.items() if any(c in s for c in '"\\b') for i in ids)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[1] <= self.width:
            return scores
        for row, last in enumerate(input_ids[:, -1].tolist()):
            if last not in self.openers:
                continue
            text = self.tokenizer.decode(input_ids[row, self.width:], skip_special_tokens=True)
            ids = [i for s in banned_starts(text) for i in self.table.get(s.lower(), ())]
            if ids:
                scores[row, ids] = float("-inf")
        return scores

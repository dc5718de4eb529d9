"""Where a row of a batched ``generate`` may stop early: after the text the turn function would still use.

:func:`codegrep.agent.protocol.apply_turn` ends an episode at its first valid ``submit`` call, ends a turn at a call
that repeats an earlier call of the turn, and runs at most ``max_calls_per_turn`` valid calls of a turn, so a row that
has closed a valid submit call, a repeated call, or that many valid calls has written everything that can still
change its episode. Decoding past that point only costs time: on 2 CPU cores a batch decodes until its longest row
stops, and one row that keeps writing after its submit held 15 others for up to 256 steps (the first cold smoke run,
docs/training.md); a looping row (the same grep again and again) did the same in the second. Like a stop sequence
of an inference server, the row ends there; the cut text is not written, so what it would have added is missing
from the episode: format errors in blocks after a submit, or the "calls over the limit" note (those calls were
never run anyway), and its tokens.
"""
from __future__ import annotations

from typing import Any

_CLOSE = "</tool_call>"


def turn_complete(text: str, max_calls: int | None) -> bool:
    """Whether a turn's text already holds all the turn function will use: a closed, valid submit call, a closed
    call repeating an earlier one (the protocol ends the turn there), or ``max_calls`` closed, valid, distinct calls
    (``None``: only a submit or a repeat ends it) — read by the protocol's own parser (``parse_tool_calls``), as
    ``apply_turn`` reads them.

    >>> call = '<tool_call>{"name": "grep", "arguments": {"pattern": "%s"}}</tool_call>'
    >>> turn_complete(call % "x", 2), turn_complete(call % "x" + call % "y", 2), turn_complete(call % "x", None)
    (False, True, False)
    >>> turn_complete(call % "x" + call % "x", 5)  # a repeat ends the turn
    True
    >>> turn_complete('<tool_call>{"name": "submit", "arguments": {"files": ["a.py"]}}</tool_call>', None)
    True
    >>> turn_complete('<tool_call>{"name": "submit", "arguments": {"files": ["a.py"', 3)  # not closed yet
    False
    """
    from codegrep.agent.protocol import parse_tool_calls

    closed = text[:text.rfind(_CLOSE) + len(_CLOSE)] if _CLOSE in text else ""
    if not closed:
        return False
    turn = parse_tool_calls(closed)
    if turn.submit is not None or turn.repeated:
        return True
    return max_calls is not None and len(turn.calls) >= max_calls


class TurnStop:
    """A transformers ``StoppingCriteria``: True for each row whose new text is :func:`turn_complete`.

    Only rows whose last token holds a ``>`` are decoded (a closing tag ends with one), so a step costs a set lookup
    per row. ``prompt_width`` is the (left-padded) prompt length: new tokens start there.
    """

    def __init__(self, tokenizer: Any, prompt_width: int, max_calls: int | None) -> None:
        self.tokenizer, self.width, self.max_calls = tokenizer, prompt_width, max_calls
        self.closing = closing_token_ids(tokenizer)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[1] <= self.width:
            return done
        for row, last in enumerate(input_ids[:, -1].tolist()):
            if last in self.closing:
                text = self.tokenizer.decode(input_ids[row, self.width:], skip_special_tokens=True)
                done[row] = turn_complete(text, self.max_calls)
        return done


_CLOSING_IDS: dict[int, frozenset[int]] = {}


def closing_token_ids(tokenizer: Any) -> frozenset[int]:
    """Ids of the tokens whose text contains ``>`` (computed once per tokenizer; a superset is harmless: it only
    costs a decode)."""
    key = id(tokenizer)
    if key not in _CLOSING_IDS:
        vocab = tokenizer.get_vocab()
        _CLOSING_IDS[key] = frozenset(i for t, i in vocab.items() if ">" in t)  # byte-level BPE keeps ASCII as is
    return _CLOSING_IDS[key]

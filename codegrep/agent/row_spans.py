"""Decoding attention over each row's own span of the cache, not the batch's padded width.

A batch of histories is left-padded to its longest row, and a decoding step's attention reads every cache slot of
every row, padding included (masked, but read: the CPU kernel's cost follows the key length, not the mask). On the
smoke profile's batches of 8 the mask was 61% dense on 32 seeded train tasks sorted by issue length and 27% where
one long history shared a batch with short ones; attention was about half of a decoding step on 2 cores.

:func:`row_spans` splits the batch into contiguous groups of rows, each attending from its earliest non-padding
slot; :func:`span_attention` runs transformers' own SDPA attention once per group on views of the cache (no copy)
and concatenates the outputs. The slots each row attends and their weights are the same (a masked slot weighs
exactly 0 either way); only float rounding can differ, as it can between batch sizes (the kernel sums over another
key length). :func:`spans` switches a model to it for the decoding loop (``prefix_cache.decode_rows``);
prefill and training forwards keep plain SDPA. ``codegrep bench decode --attention padded spans`` measures it.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

NAME = "codegrep_row_spans"
"""The attention implementation's name in transformers' ``AttentionInterface`` (registered on first use)."""

CALL_COST = 512
"""One attention call's fixed cost in row-slots. Measured on 2 Xeon cores (SmolLM2's shapes, fp32): a call costs
~0.1 ms beyond its work, a (row, cache slot) ~0.12 us with the states in cache and ~0.2 us in a decoding step (a
4-token step of 8 rows over 3,000 slots, 3.3-4.9 ms, the states read from memory). A constant, not measured at run
time, so the grouping (and with it float rounding) never depends on the machine."""


def row_spans(starts: list[int], width: int, call_cost: int = CALL_COST) -> list[tuple[int, int, int]]:
    """Contiguous groups of a batch's rows as ``(first, end, start)``: rows ``first..end-1`` attend slots
    ``start..width-1``, ``start`` the group's earliest first non-padding slot. Chosen to minimise the sum over groups
    of ``call_cost + rows * (width - start)`` (dynamic programming over the rows in batch order; pure).

    >>> row_spans([0, 0, 0], 100)  # no padding: one group, the plain call
    [(0, 3, 0)]
    >>> row_spans([2000, 0, 2100, 2050], 3000)  # the long row alone; the short rows skip their padding
    [(0, 1, 2000), (1, 2, 0), (2, 4, 2050)]
    >>> row_spans([10, 0, 20], 3000)  # little padding: a call costs more than it saves
    [(0, 3, 0)]
    >>> row_spans([], 5)
    []
    """
    n = len(starts)
    best, cut = [0] + [None] * n, [0] * (n + 1)
    for end in range(1, n + 1):
        low = width
        for first in range(end - 1, -1, -1):
            low = min(low, starts[first])
            cost = best[first] + call_cost + (end - first) * (width - low)
            if best[end] is None or cost < best[end]:
                best[end], cut[end] = cost, first
    groups, end = [], n
    while end > 0:
        first = cut[end]
        groups.append((first, end, min(starts[first:end])))
        end = first
    return groups[::-1]


def span_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *,
                   row_spans: list[tuple[int, int, int]] | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' SDPA attention (``sdpa_attention_forward``) once per group of ``row_spans`` on views of the
    query, cache and mask rows and slots it names; without spans or a mask (nothing padded), the plain call."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not row_spans or attention_mask is None or (len(row_spans) == 1 and row_spans[0][2] == 0):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    import torch

    outs = [sdpa_attention_forward(module, query[a:b], key[a:b, :, s:], value[a:b, :, s:],
                                   attention_mask[a:b, ..., s:], **kwargs)[0] for a, b, s in row_spans]
    return torch.cat(outs, 0), None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, span_attention)
        AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])  # masks built as for SDPA


@contextmanager
def spans(model: Any, on: bool = True) -> Iterator[bool]:
    """While inside, ``model`` (an SDPA model) attends through :func:`span_attention`, which takes ``row_spans=``
    from the forward's keyword arguments; yields whether it does (False: another attention, or ``on`` False).
    Restored on exit, errors included."""
    config = getattr(model, "config", None)
    if not on or getattr(config, "_attn_implementation", None) != "sdpa":
        yield False
        return
    _register()
    config._attn_implementation_internal = NAME
    try:
        yield True
    finally:
        config._attn_implementation_internal = "sdpa"


def step_spans(attn: Any) -> list[tuple[int, int, int]]:
    """:func:`row_spans` of a decoding step from its 2-D attention mask (rows x cache slots, 1 = attended): each
    row's first attended slot.

    >>> import torch
    >>> step_spans(torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]]))
    [(0, 2, 0)]
    """
    return row_spans(attn.argmax(1).tolist(), attn.shape[1], CALL_COST)

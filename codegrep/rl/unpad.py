"""Training forwards that skip work: no padding masks (the causal attention kernel), no LM head on unscored positions.

On CPU, SDPA runs a flash-style causal kernel when a forward has no attention mask, and a masked kernel over
every position when it has one: in a profile of GRPO's loss (2 rows x 3,500 tokens, bf16) the masked
forward+backward took 61 s, 41 s of it in attention, against 36 s unmasked (``codegrep bench train``:
``flushed_speedup_over_padded``, ``sft.unmasked_speedup``). Two places pay for masks that carry no information the causal rule lacks:

- **GRPO's loss and the KL probe** (TRL pads every row of a generation batch to the batch's width: prompts on
  the left, completions on the right). :func:`flushed_rows` moves each row's real tokens to column 0, so only
  trailing pads are left, and the trainer (``CodeGrepGRPOTrainer._get_per_token_logps_and_entropies``) runs the
  batch with no mask, then puts the log-probs back in TRL's layout. Positions restart at 0 per row, as when the
  row was generated (rotary attention depends only on the distance between positions, so the padded forward's
  shifted positions give the same scores). Rows stay batched unless flushing leaves a chunk mostly padding
  (:data:`SPLIT_ABOVE_PADDING`): one row at a time loses to the padded batch on short rows (``codegrep bench
  train``: ``per_row_tokens_per_s`` against ``flushed_tokens_per_s``).
- **The SFT warm start** (TRL's collator pads on the right). A row's real tokens never attend to later
  positions under the causal rule, so a mask that only hides trailing pads changes nothing a loss reads
  (pads carry label -100): :func:`drop_right_padding_masks` removes it before the model sees it.

- **TRL's fused LM head on CPU** (:func:`labelled_positions_only`). ``model(..., labels=, fused_lm_head=True)``
  (SFT's and GRPO's loss, GRPO's reference log-probs) projects only the positions whose label is not -100 through
  the 49K-wide head on Triton devices, but every position elsewhere (then zeroes the rest), so on CPU a
  demonstration whose assistant turns are a fifth of its tokens, or a GRPO row whose prompt (~650 tokens on smoke)
  is about as long as its turns and observations, pays the head's projection, softmax, entropy and backward for
  every unscored token. The switch applies TRL's own compaction on CPU too (measured by hand on 16 of the smoke
  warm start's demonstrations, 4 SFT steps of 4, both orders: ~1.9x, docs/results/sft_labelled_by_hand.json;
  ``codegrep bench train``: ``sft.labelled_only_speedup``, ``head.labelled_only_speedup``).

All three change how much work a forward does, not what it computes (tests: ``tests/test_unpad.py``, fp64).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


def row_spans(mask: Any) -> list[tuple[int, int] | None]:
    """Each row's real tokens as ``(start, end)`` when they are one contiguous run of ones, else None.

    >>> import torch
    >>> row_spans(torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 0], [0, 0, 0, 0]]))
    [(1, 3), (0, 4), None, None]
    """
    spans: list[tuple[int, int] | None] = []
    for row in mask.tolist():
        ones = [i for i, v in enumerate(row) if v]
        contiguous = bool(ones) and ones[-1] - ones[0] + 1 == len(ones)
        spans.append((ones[0], ones[-1] + 1) if contiguous else None)
    return spans


@dataclass(frozen=True)
class Flush:
    """Rows of a prompt + completion batch with their real tokens moved to column 0.

    ``starts``/``ends``: each row's real tokens in the padded batch (``ends`` reach at least one column into
    the completion, so every row has a scored position); ``prompt``: the padded prompt width (TRL's prompt
    columns). Trailing pads of a flushed row are never attended by its real tokens (causal rule).
    """

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    prompt: int

    def chunk(self, lo: int, hi: int) -> Flush:
        """The rows ``lo:hi``."""
        return Flush(self.starts[lo:hi], self.ends[lo:hi], self.prompt)

    @property
    def width(self) -> int:
        """Columns of the flushed batch: its longest row."""
        return max(e - s for s, e in zip(self.starts, self.ends))

    @property
    def window(self) -> int:
        """Scored columns (TRL's ``logits_to_keep``): from the shortest real prompt's end to the batch's end."""
        return self.width - min(self.prompt - s for s in self.starts)

    @property
    def padding_share(self) -> float:
        """Share of the flushed batch's positions that are pads.

        >>> Flush((0, 2), (4, 4), 3).padding_share
        0.25
        """
        return 1 - sum(e - s for s, e in zip(self.starts, self.ends)) / (len(self.starts) * self.width)

    def gather_ids(self, ids: Any) -> Any:
        """The flushed token ids (pads: 0)."""
        out = ids.new_zeros((len(self.starts), self.width))
        for i, (s, e) in enumerate(zip(self.starts, self.ends)):
            out[i, :e - s] = ids[i, s:e]
        return out

    def back(self, values: Any, keep: int) -> Any:
        """Per-position values over the flushed ``window`` -> TRL's ``(rows, keep)`` completion layout (0 where a
        row has no real completion token).

        >>> import torch
        >>> f = flushed_rows(torch.tensor([[0, 1, 1, 1, 0], [1, 1, 1, 1, 1]]), keep=3)
        >>> f.width, f.window
        (5, 4)
        >>> f.back(torch.tensor([[10., 11., 12., 13.], [20., 21., 22., 23.]]), 3)
        tensor([[10., 11.,  0.],
                [21., 22., 23.]])
        """
        import torch

        first = self.prompt - torch.tensor(self.starts)[:, None] - (self.width - self.window)
        k = torch.arange(keep)[None, :]
        valid = k < (torch.tensor(self.ends)[:, None] - self.prompt)
        picked = values.gather(1, (first + k).clamp(max=self.window - 1).to(values.device))
        return picked * valid.to(device=values.device, dtype=values.dtype)


SPLIT_ABOVE_PADDING = 0.25
"""A flushed chunk with more than this share of pads runs one row at a time instead. Trailing pads still cost
compute (each attends every real token before it); a row alone costs batching. At a GRPO micro-batch's length
(2 x 3,500 tokens, bf16, ``docs/results/bench_train_loss_flushed.json``) the flushed batch ran 131.6 positions/s
(pads included) and rows alone 95.3 real tokens/s, so rows alone win above ~28% padding; on short rows they lose
far more (4 x 256 tokens: 0.45x the padded batch), so the rule errs toward batching."""


def flushed_rows(mask: Any, keep: int) -> Flush | None:
    """The :class:`Flush` of a batch whose last ``keep`` columns are completions; None when a row's real tokens are
    not one run starting inside the prompt (TRL's padded forward is then used as it is).

    >>> import torch
    >>> flushed_rows(torch.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 0, 0]]), keep=2)
    Flush(starts=(2, 1), ends=(4, 4), prompt=3)
    >>> flushed_rows(torch.tensor([[1, 0, 1, 1, 0]]), keep=2) is None
    True
    """
    prompt = mask.size(1) - keep
    spans = row_spans(mask)
    if any(span is None or span[0] >= prompt for span in spans):
        return None
    return Flush(tuple(s for s, _ in spans), tuple(max(e, prompt + 1) for _, e in spans), prompt)


def right_padding_only(mask: Any) -> bool:
    """True when every row of ``mask`` is ones followed by zeros (trailing padding only, at least one token).

    >>> import torch
    >>> right_padding_only(torch.tensor([[1, 1, 0], [1, 1, 1]])), right_padding_only(torch.tensor([[0, 1, 1]]))
    (True, False)
    """
    return all(span is not None and span[0] == 0 for span in row_spans(mask))


def _drop_mask_hook(module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    mask = kwargs.get("attention_mask")
    if module.training and mask is not None and mask.dim() == 2 and right_padding_only(mask):
        kwargs = {**kwargs, "attention_mask": None}
    return args, kwargs


def drop_right_padding_masks(model: Any) -> Any:
    """Make ``model`` ignore a right-padding-only attention mask in training forwards; returns the hook's handle
    (``handle.remove()`` restores the model). Evaluation and generation forwards are untouched."""
    return model.register_forward_pre_hook(_drop_mask_hook, with_kwargs=True)


@contextmanager
def labelled_positions_only(on: bool = True) -> Iterator[None]:
    """Within this block TRL's fused LM head scores only labelled positions on CPU too (``on=False``: as it is).

    TRL 1.16's ``add_fused_lm_head`` forward compacts the hidden states to the positions whose label is not -100
    when ``trl.trainer.utils._use_triton(device)`` is true (CUDA/XPU with Triton) and otherwise projects every
    position, a rule made for compilers that recompile on new shapes. This block makes that test true for CPU
    devices as well; the tiles then run TRL's torch path (its kernel module asks its own ``_use_triton``), the
    values at labelled positions are the same computation on fewer rows, and unlabelled ones hold 0 either way.
    The previous rule is restored on exit, errors included; blocks nest. A TRL without that hook is refused in one
    line (the ``trl`` pin in pyproject.toml says which versions have it).

    >>> import torch, trl.trainer.utils as tu
    >>> before = tu._use_triton(torch.device("cpu"))
    >>> with labelled_positions_only():
    ...     tu._use_triton(torch.device("cpu"))
    True
    >>> tu._use_triton(torch.device("cpu")) == before
    True
    """
    if not on:
        yield
        return
    import trl.trainer.utils as tu

    rule = getattr(tu, "_use_triton", None)
    if not callable(rule):
        raise RuntimeError("trl.trainer.utils has no _use_triton: this TRL's fused LM head is not the one "
                           "codegrep.rl.unpad.labelled_positions_only knows (pinned trl>=1.16,<1.17)")
    tu._use_triton = lambda device: device.type == "cpu" or rule(device)
    try:
        yield
    finally:
        tu._use_triton = rule


def score_labelled_only(trainer: Any) -> Any:
    """Make ``trainer``'s ``compute_loss`` run in :func:`labelled_positions_only` (SFT's loss forward); returns the
    trainer. The backward needs no switch: it follows the shapes the forward saved."""
    import functools

    loss = trainer.compute_loss

    @functools.wraps(loss)
    def compute_loss(*args: Any, **kwargs: Any) -> Any:
        with labelled_positions_only():
            return loss(*args, **kwargs)

    trainer.compute_loss = compute_loss
    return trainer

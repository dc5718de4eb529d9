"""GRPO on the distribution the rollouts sampled from: the turn controls' masks, in the loss and the KL probe.

A turn control (``codegrep.agent.turn_controls``: the copy constraint, the argument-keys guard, ``min_greps``) sets
some tokens' logits to ``-inf`` before sampling, so a rollout's token ``a`` at such a position was drawn from
``pi_c(a) = pi(a) / sum_{b allowed} pi(b)``, not from ``pi``. TRL's loss reads ``log pi(a)`` (as with vLLM's guided
decoding). With the mask left out, a negative advantage can lower ``log pi(a)`` by moving mass onto tokens the control
bans, which are never sampled and so never penalised: the seventeenth cold run's policy, decoded without the guard,
wrote nested arguments on 88 turns of 55 and never submitted (``docs/results/argument_keys_check_17_27.json``).

Here a rollout records, at each position where a control banned something, which tokens it allowed (or banned, when
that list is shorter): :class:`RestrictionRecorder`, a ``LogitsProcessor`` around the controls. The trainer then
replaces the log-prob of the sampled token at those positions by the masked, renormalised one
(:func:`masked_token_logps`), from the same final hidden states the loss computes anyway (:func:`capture_hidden`), so
the gradient moves probability only among the tokens the sampler could have drawn. The KL probe reads the same
log-probs (the policy and the frozen reference under the same masks: the drift of what is sampled), and
``constraints/allowed_mass`` logs how much of the unconstrained policy's mass the controls still allow: the drift the
mask now hides from the loss, in plain sight.
"""
from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import Any, Iterator

import torch
from transformers import LogitsProcessor, LogitsProcessorList

Restriction = list  # [completion position, allowed (True: ids are the allowed tokens; False: ids are banned), ids]


def _key(ids: torch.Tensor) -> bytes:
    """A row's ids so far, as a short digest (rows with the same ids get the same controls: they depend on ids only)."""
    return hashlib.blake2b(ids.detach().cpu().numpy().tobytes(), digest_size=16).digest()


class RestrictionRecorder(LogitsProcessor):
    """Runs ``processors`` (a ``LogitsProcessorList``) and records, keyed by each row's ids so far, which tokens they
    took away (set to ``-inf``) from a finite set: the allowed ids, or the banned ones when those are fewer.

    >>> class BanTwo(LogitsProcessor):
    ...     def __call__(self, input_ids, scores):
    ...         scores[:, 2] = float("-inf"); return scores
    >>> rec = RestrictionRecorder([BanTwo()])
    >>> prompt = torch.tensor([[5, 6]])
    >>> _ = rec(prompt, torch.zeros(1, 4)); _ = rec(torch.tensor([[5, 6, 1]]), torch.zeros(1, 4))
    >>> rec.restrictions(torch.tensor([[5, 6, 1, 3]]), width=2, lengths=[2])
    [[[0, False, [2]], [1, False, [2]]]]
    """

    def __init__(self, processors: Any) -> None:
        self.processors = LogitsProcessorList(processors)
        self.seen: dict[bytes, tuple[bool, list[int]]] = {}

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        before = torch.isfinite(scores)
        scores = self.processors(input_ids, scores)
        after = torch.isfinite(scores)
        taken = before & ~after
        for row in taken.any(-1).nonzero()[:, 0].tolist():
            allowed, banned = after[row].nonzero()[:, 0], taken[row].nonzero()[:, 0]
            self.seen[_key(input_ids[row])] = (True, allowed.tolist()) if len(allowed) <= len(banned) \
                else (False, banned.tolist())
        return scores

    def restrictions(self, out: torch.Tensor, width: int, lengths: list[int]) -> list[list[Restriction]]:
        """Per row of a decode's output (prompt columns ``:width``, then new tokens), the restrictions at its first
        ``lengths[row]`` new tokens, each ``[position among the new tokens, allowed, ids]``."""
        rows: list[list[Restriction]] = []
        for row, n in enumerate(lengths):
            found = []
            for t in range(n):
                hit = self.seen.get(_key(out[row, :width + t]))
                if hit is not None:
                    found.append([t, hit[0], hit[1]])
            rows.append(found)
        return rows


@contextmanager
def capture_hidden(model: Any) -> Iterator[list[torch.Tensor]]:
    """Collects the backbone's ``last_hidden_state`` of every forward of ``model`` inside the block (in call order;
    the tensors keep their autograd graph): what TRL's fused head projects onto the vocabulary."""
    found: list[torch.Tensor] = []
    backbone = getattr(model, "base_model", model)

    def hook(module: Any, args: Any, output: Any) -> None:
        found.append(output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0])

    handle = backbone.register_forward_hook(hook)
    try:
        yield found
    finally:
        handle.remove()


def check_plain_head(model: Any) -> None:
    """The masked log-probs project hidden states with the LM head's weight and bias only: refuse a model whose logits
    are scaled or soft-capped (TRL's fused head applies those; this module does not)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    odd = {k: getattr(config, k) for k in ("final_logit_softcapping", "logit_scale", "output_multiplier",
                                            "lm_head_multiplier", "logits_scaling")
           if getattr(config, k, None) not in (None, 1, 1.0)}
    if odd:
        raise ValueError(f"constrained_loss: the model's logits are scaled or capped ({odd}); the masked log-probs "
                         "support plain LM heads only: set --constrained_loss false")


def masked_token_logps(hidden: torch.Tensor, tokens: torch.Tensor, restrictions: list[tuple[bool, list[int]]],
                       weight: torch.Tensor, bias: torch.Tensor | None = None, temperature: float = 1.0,
                       chunk: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of ``tokens`` (N,) from hidden states (N, H) through the head ``weight`` (V, H), at ``temperature``,
    under each position's restriction (allowed ids, or banned ids), renormalised over what is left; and the log of the
    unconstrained mass the restriction allows. fp32 at least, ``chunk`` positions at a time. A token outside its allowed set
    (a decoder that did not apply the recorded mask) is counted as allowed, so its log-prob stays finite.

    >>> w = torch.eye(3); h = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    >>> lp, mass = masked_token_logps(h, torch.tensor([0, 0]), [(True, [0, 1]), (False, [2])], w)
    >>> [round(x, 4) for x in lp.tolist()], [round(x, 4) for x in mass.exp().tolist()]
    ([-0.3133, -0.3133], [0.7881, 0.7881])
    >>> round(torch.log_softmax(torch.tensor([1.0, 0.0]), 0)[0].item(), 4)  # by hand: softmax over tokens 0 and 1
    -0.3133
    >>> round((1 + torch.e) / (2 + torch.e), 4)  # their share of the unmasked mass
    0.7881
    """
    vocab = weight.shape[0]
    logps, masses = [], []
    with torch.autocast(hidden.device.type, enabled=False):
        dtype = torch.promote_types(weight.dtype, torch.float32)  # fp32 at least (fp64 stays fp64)
        w = weight.to(dtype)
        b = bias.to(dtype) if bias is not None else None
        for lo in range(0, len(tokens), chunk):
            h = hidden[lo:lo + chunk].to(dtype)
            z = (h @ w.T + (b if b is not None else 0.0)) / temperature
            keep = torch.zeros((len(h), vocab), dtype=torch.bool, device=z.device)
            for i, (allowed, ids) in enumerate(restrictions[lo:lo + chunk]):
                index = torch.tensor(ids, dtype=torch.long, device=z.device)
                if allowed:
                    keep[i, index] = True
                else:
                    keep[i] = True
                    keep[i, index] = False
            keep[torch.arange(len(h)), tokens[lo:lo + chunk]] = True
            picked = z.gather(1, tokens[lo:lo + chunk, None].to(z.device))[:, 0]
            allowed_lse = z.masked_fill(~keep, float("-inf")).logsumexp(-1)
            logps.append(picked - allowed_lse)
            masses.append(allowed_lse - z.logsumexp(-1))
    return torch.cat(logps), torch.cat(masses)

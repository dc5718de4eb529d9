"""KL drift from the initial policy, logged every step in every arm (also when ``beta = 0``).

TRL only computes a KL when it is in the loss (``beta != 0``). The probe measures the same quantity
without touching the loss: per-token KL of the sampled completion tokens between the current policy
and a frozen copy of the initial (post warm start) policy, averaged over model-generated tokens only
(tool observations are masked out). The estimator is TRL's ``k3``:
``KL ~= exp(ref - pol) - (ref - pol) - 1`` (unbiased, always >= 0, Schulman 2020).
"""
from __future__ import annotations

from typing import Any

import torch


def k3_per_token(policy_logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference) from sampled-token log-probs.

    >>> k3_per_token(torch.tensor([-1.0]), torch.tensor([-1.0])).item()
    0.0
    >>> round(k3_per_token(torch.tensor([0.0]), torch.tensor([-1.0])).item(), 4)
    0.3679
    """
    delta = ref_logps - policy_logps
    return torch.exp(delta) - delta - 1.0


def masked_mean_kl(policy_logps: torch.Tensor, ref_logps: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean k3 KL over the tokens where ``mask`` is 1 (0.0 when nothing is unmasked).

    >>> pol, ref = torch.tensor([[0.0, -5.0]]), torch.tensor([[-1.0, 0.0]])
    >>> round(masked_mean_kl(pol, ref, torch.tensor([[1, 0]])), 4)
    0.3679
    """
    m = mask.to(policy_logps.dtype)
    n = m.sum()
    if n.item() == 0:
        return 0.0
    return float((k3_per_token(policy_logps, ref_logps) * m).sum() / n)


class KLProbe:
    """The frozen reference (TRL's ``ref_model`` when ``beta != 0``, else one built the same way).

    The policy side costs nothing extra: the loss computes the current policy's log-probs of exactly
    these tokens before the update (``num_iterations = 1``), and the trainer hands them over.
    """

    def __init__(self, reference: torch.nn.Module) -> None:
        self.reference = reference.eval()
        for p in self.reference.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def reference_logps(self, trainer: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Reference log-probs of the completion tokens of one scored batch (the dict TRL builds)."""
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        keep = batch["completion_ids"].size(1)
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            self.reference, ids, attention, keep, trainer.args.per_device_train_batch_size)
        return logps


def model_token_mask(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """1 on model-generated completion tokens, 0 on padding and tool observations."""
    mask = batch["completion_mask"]
    return mask * batch["tool_mask"] if "tool_mask" in batch else mask

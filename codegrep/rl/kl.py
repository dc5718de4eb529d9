"""KL drift from the initial policy, logged every step in every arm (also when ``beta = 0``).

TRL only computes a KL when it is in the loss (``beta != 0``). The probe measures the same quantity
without touching the loss: per-token KL of the sampled completion tokens between the current policy
and a frozen copy of the initial (post warm start) policy, averaged over model-generated tokens only
(tool observations are masked out). The estimator is TRL's ``k3``:
``KL ~= exp(ref - pol) - (ref - pol) - 1`` (unbiased, always >= 0, Schulman 2020).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback


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


# --- exact KL on a fixed probe set -------------------------------------------------------------------------------
# The k3 estimate above is on-policy: each step it averages over tokens the *current* policy sampled, so
# its value mixes drift with which tasks came up. The probe below is the same at every step and in every
# arm: fixed prompts and completions (recorded once from the initial policy), and at each of their
# model-token positions the exact KL(policy || initial) over the whole vocabulary.

def full_vocab_kl(policy_logits: torch.Tensor, ref_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Per-position exact ``KL(softmax(policy/T) || softmax(ref/T))`` over the last (vocabulary) axis.

    >>> a = torch.tensor([[0.0, 0.0]]); b = torch.tensor([[0.0, 1.0]])
    >>> full_vocab_kl(a, a).item(), round(full_vocab_kl(a, b).item(), 4)
    (0.0, 0.1201)
    """
    logp = torch.log_softmax(policy_logits.float() / temperature, dim=-1)
    logq = torch.log_softmax(ref_logits.float() / temperature, dim=-1)
    return (logp.exp() * (logp - logq)).sum(-1).clamp_min(0.0)


def read_probe_set(path: str | Path, what: str = "probe set") -> list[dict[str, list[int]]]:
    """Probe sequences from a JSONL file: ``prompt_ids`` (not empty), ``completion_ids``, ``env_mask`` (1 = model
    token, as long as ``completion_ids``), lists of integers. A missing file, a row that is not a JSON object or
    lacks those, and a file without rows (its KL would read 0) are one line naming the file (and line); ``what``
    names the setting that gave ``path``."""
    from codegrep.errors import UserError
    from codegrep.files import jsonl_objects

    rows = []
    for n, r in jsonl_objects(path, what):
        keys = ("prompt_ids", "completion_ids", "env_mask")
        missing = [k for k in keys if k not in r]
        ints = all(isinstance(r.get(k), list) and all(type(v) is int for v in r[k]) for k in keys)
        if missing or not ints or not r["prompt_ids"] or len(r["completion_ids"]) != len(r["env_mask"]):
            raise UserError(f"{path}:{n}: probe row needs prompt_ids (not empty), completion_ids and an env_mask of "
                            f"the same length, lists of integers (missing {missing})")
        rows.append(r)
    if not rows:
        raise UserError(f"{what} {path}: no probe rows (its KL would read 0)")
    return rows


@torch.no_grad()
def probe_kl(policy: torch.nn.Module, reference: torch.nn.Module, probes: list[dict[str, list[int]]],
             temperature: float = 1.0, ref_cache: list[torch.Tensor] | None = None) -> float:
    """Mean exact KL(policy || reference) over every model-token position of every probe sequence.

    ``ref_cache`` (a list, filled on the first call) keeps the reference's logits at those positions,
    so later calls cost one policy forward per sequence.
    """
    was_training = policy.training
    policy.eval()
    device = next(policy.parameters()).device
    total, count = 0.0, 0
    try:
        for k, row in enumerate(probes):
            ids = torch.tensor([row["prompt_ids"] + row["completion_ids"]], device=device)
            # logits at position t predict token t + 1: the completion token j is predicted at len(prompt) + j - 1
            pos = torch.tensor([len(row["prompt_ids"]) + j - 1 for j, m in enumerate(row["env_mask"]) if m],
                               device=device)
            if not len(pos):
                continue
            pol = policy(input_ids=ids, logits_to_keep=pos).logits[0]  # the head on the probed positions only
            if ref_cache is not None and k < len(ref_cache):
                ref = ref_cache[k].to(device)
            else:
                ref = reference(input_ids=ids, logits_to_keep=pos).logits[0].float()
                if ref_cache is not None:
                    ref_cache.append(ref.cpu())
            kl = full_vocab_kl(pol, ref, temperature)
            total, count = total + float(kl.sum()), count + len(pos)
    finally:
        policy.train(was_training)
    return total / max(count, 1)


class ExactProbeCallback(TrainerCallback):
    """Every ``every`` optimizer steps (and at the last one), the exact probe KL of the trained policy to
    the frozen initial policy, logged as ``kl_exact`` in the same step's metrics row."""

    def __init__(self, trainer: Any, reference: torch.nn.Module, probes: list[dict[str, list[int]]],
                 every: int) -> None:
        self.trainer, self.reference, self.probes, self.every = trainer, reference, probes, max(int(every), 1)
        self.cache: list[torch.Tensor] = []

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001 (transformers' signature)
        if state.global_step % self.every and state.global_step != state.max_steps:
            return
        started = time.perf_counter()
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        kl = probe_kl(model, self.reference, self.probes, self.trainer.temperature, self.cache)
        self.trainer._metrics["train"]["kl_exact"].append(kl)
        self.trainer._metrics["train"]["time/probe_s"].append(time.perf_counter() - started)

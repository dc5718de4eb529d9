"""GRPO on TRL for the retrieval agent: the run's own arguments and a thin ``GRPOTrainer`` subclass.

The subclass overrides one method, ``_generate_and_score_completions``, to (1) hand the batch's rows
to the multi-turn rollout (``codegrep.rl.rollout``), (2) add the advantage-layer efficiency term
after TRL's group normalisation, (3) log the episode numbers and the KL probe. Everything else
(generation backends incl. vLLM, loss, clipping, DeepSpeed, checkpoints) is TRL's.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from codegrep.rl.advantages import LAYERS, combined_advantages, efficiency_advantage
from codegrep.rl.kl import KLProbe, masked_mean_kl, model_token_mask


@dataclass
class CodeGrepArgs:
    """CodeGrep's training arguments; TRL's ``GRPOConfig`` carries the rest (same YAML, same CLI)."""

    profile: str = field(default="smoke", metadata={"help": "Project profile (ci|smoke|paper or a YAML path) whose "
                                                              "tasks/env/agent sections the run uses."})
    model: str = field(default="smollm2", metadata={"help": "Policy: 'smollm2' (offline), a model dir or a hub id."})
    out: str = field(default="artifacts/train", metadata={"help": "Runs are written to OUT/RUN_NAME."})
    name: str | None = field(default=None, metadata={"help": "Run name; default <profile>-<layer>-lam<λ>-s<seed>."})
    resume: bool = field(default=False, metadata={"help": "Continue from the run's last checkpoint."})
    efficiency_layer: str = field(default="advantage", metadata={
        "help": f"Where the efficiency signal enters: one of {LAYERS}."})
    efficiency_lambda: float = field(default=0.1, metadata={"help": "λ, the efficiency coefficient (both layers)."})
    lambda_grid: list[float] = field(default_factory=lambda: [0.1], metadata={
        "help": "λ values the ablation sweeps (same grid for every layer)."})
    efficiency_weights: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0], metadata={
        "help": "Cost mix over (rounds, tool calls, generated tokens)."})
    efficiency_scales: list[float] | None = field(default=None, metadata={
        "help": "Budgets normalising (rounds, calls, tokens); default (max_turns, max_turns*max_calls, "
                "max_turns*max_completion_length)."})
    fbeta: float = field(default=0.5, metadata={"help": "β of the retrieval F-beta reward (<1 favours precision)."})
    format_weight: float = field(default=0.2, metadata={"help": "Weight of the format term in the task reward."})
    max_turns: int = field(default=2, metadata={"help": "Model turns per episode (the last one must submit)."})
    max_calls_per_turn: int = field(default=4, metadata={"help": "Tool calls executed per turn."})
    max_observation_tokens: int = field(default=256, metadata={"help": "Observation budget per turn (approx. tokens)."})
    max_issue_chars: int = field(default=600, metadata={"help": "Issue text is cut to this many characters."})
    train_tasks: int | None = field(default=None, metadata={"help": "Use at most this many train-split tasks."})
    warm_start: bool = field(default=True, metadata={"help": "Supervised warm start on demonstrations first."})
    sft_sources: list[str] = field(default_factory=lambda: ["synthetic"], metadata={
        "help": "Demonstrations: 'synthetic' (oracle-guided scripted episodes on the train split) and/or 'catm'."})
    sft_epochs: float = field(default=2.0, metadata={"help": "Warm-start epochs over the demonstrations."})
    sft_learning_rate: float = field(default=5e-5, metadata={"help": "Warm-start learning rate."})
    sft_batch_size: int = field(default=4, metadata={"help": "Warm-start per-device batch size."})
    warm_start_dir: str | None = field(default=None, metadata={
        "help": "Cache of warm-started models (default OUT/_warm_start); shared by every arm and seed."})
    sft_max_demos: int | None = field(default=None, metadata={"help": "Use at most this many demonstrations."})
    kl_probe: bool = field(default=True, metadata={"help": "Log KL to the initial policy every step (also beta=0)."})
    save_final_model: bool = field(default=True, metadata={"help": "Save the trained policy to RUN/final."})
    eval_tasks: int | None = field(default=None, metadata={"help": "Held-out tasks for before/after evaluation."})
    ablation_layers: list[str] = field(default_factory=lambda: ["reward", "advantage", "none"], metadata={
        "help": "Efficiency layers compared by the ablation (notebook 04)."})
    ablation_seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "Seeds per ablation arm."})
    ablation_max_steps: int = field(default=8, metadata={"help": "GRPO steps per ablation run."})

    def __post_init__(self) -> None:
        if self.efficiency_layer not in LAYERS:
            raise ValueError(f"--efficiency_layer {self.efficiency_layer!r}: expected one of {LAYERS}")
        if len(self.efficiency_weights) != 3:
            raise ValueError(f"--efficiency_weights needs 3 numbers (rounds, calls, tokens), "
                             f"got {self.efficiency_weights}")

    def run_name(self, seed: int) -> str:
        """The run's directory name.

        >>> CodeGrepArgs(profile="ci", efficiency_layer="reward", efficiency_lambda=0.1).run_name(3)
        'ci-reward-lam0.1-s3'
        """
        stem = Path(self.profile).stem
        return self.name or f"{stem}-{self.efficiency_layer}-lam{self.efficiency_lambda:g}-s{seed}"


class CodeGrepGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with the advantage-layer efficiency term and a log-only KL probe."""

    def __init__(self, *args: Any, codegrep_args: CodeGrepArgs, reference_builder: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.cg = codegrep_args
        self.current_rows: list[dict[str, Any]] = []
        self.last_scores: list[Any] = []
        if self.cg.efficiency_layer in ("reward", "advantage", "none") and self.multi_objective_aggregation != \
                "sum_then_normalize":
            raise ValueError("efficiency layers reward/advantage/none need multi_objective_aggregation="
                             "'sum_then_normalize' (normalize_then_sum is its own layer)")
        if self.scale_rewards not in ("group", "none"):
            raise ValueError(f"scale_rewards={self.scale_rewards!r}: the efficiency layers are defined on group "
                             "normalisation; use 'group' or 'none'")
        self.kl_probe: KLProbe | None = None
        self._loss_policy_logps: torch.Tensor | None = None
        if self.cg.kl_probe:
            ref = self.ref_model if self.ref_model is not None else reference_builder(self)
            self.kl_probe = KLProbe(ref)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.current_rows = inputs  # the rollout reads instance ids from here (rollout_func only sees prompts)
        batch = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        groups = self.num_generations if mode == "train" else self.num_generations_eval
        f, fmt, cost = self._gathered_scores(batch["advantages"].device)
        start = self.accelerator.process_index * len(inputs)
        local = slice(start, start + len(inputs))
        scale = self.scale_rewards != "none"
        if self.cg.efficiency_layer == "advantage":
            term = efficiency_advantage(cost, groups, self.cg.efficiency_lambda, scale)
            batch["advantages"] = batch["advantages"] + torch.tensor(term[local], dtype=batch["advantages"].dtype,
                                                                     device=batch["advantages"].device)
            self._metrics[mode]["efficiency/advantage_term_abs"].append(float(np.abs(term).mean()))
        reference = combined_advantages(f, fmt, cost, groups, self.cg.efficiency_layer, self.cg.efficiency_lambda,
                                        self.cg.format_weight, scale)[local]
        gap = np.abs(reference - batch["advantages"].detach().float().cpu().numpy()).max()
        self._metrics[mode]["advantages/max_abs_gap_vs_reference"].append(float(gap))
        self._log_episode_metrics(mode)
        if self.kl_probe is not None:
            batch["probe_ref_logps"] = self.kl_probe.reference_logps(self, batch)
        return batch

    def _get_per_token_logps_and_entropies(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        out = super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
        if kwargs.get("compute_entropy"):  # only the loss asks for entropies: keep its policy log-probs
            self._loss_policy_logps = out[0].detach()
        return out

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        self._loss_policy_logps = None
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if "probe_ref_logps" in inputs and self._loss_policy_logps is not None:
            mode = "train" if self.model.training else "eval"
            kl = masked_mean_kl(self._loss_policy_logps, inputs["probe_ref_logps"], model_token_mask(inputs))
            self._metrics[mode]["kl_probe"].append(kl)
        return loss

    def _gathered_scores(self, device: torch.device) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """F-beta, format and cost of every completion on every process, in TRL's batch order."""
        local = torch.tensor([[s.f_beta, s.format, s.efficiency_cost] for s in self.last_scores],
                             dtype=torch.float64, device=device)
        allv = self.accelerator.gather(local).cpu().numpy()
        return allv[:, 0], allv[:, 1], allv[:, 2]

    def _log_episode_metrics(self, mode: str) -> None:
        fields = ("f_beta", "precision", "recall", "format", "rounds", "tool_calls", "tokens", "efficiency_cost",
                  "submitted")
        for name in fields:
            vals = [float(getattr(s, name)) for s in self.last_scores]
            self._metrics[mode][f"episode/{name}"].append(float(np.mean(vals)))
        task = [s.f_beta + self.cg.format_weight * s.format for s in self.last_scores]
        self._metrics[mode]["episode/task_reward"].append(float(np.mean(task)))
        self._metrics[mode]["episode/task_reward_std"].append(float(np.std(task, ddof=1)) if len(task) > 1 else 0.0)


# TRL/Trainer log keys -> the names metrics.jsonl promises (docs/training.md lists them).
METRIC_NAMES = {
    "reward": "reward_mean", "reward_std": "reward_std", "episode/task_reward": "task_reward",
    "episode/task_reward_std": "task_reward_std", "episode/f_beta": "f_beta", "episode/precision": "precision",
    "episode/recall": "recall", "episode/format": "format", "episode/submitted": "submitted",
    "episode/rounds": "rounds", "episode/tool_calls": "tool_calls", "episode/tokens": "tokens",
    "episode/efficiency_cost": "efficiency_cost", "efficiency/advantage_term_abs": "efficiency_advantage_abs",
    "kl_probe": "kl", "kl": "kl_trl", "entropy": "entropy", "clip_ratio/region_mean": "clip_ratio",
    "grad_norm": "grad_norm", "loss": "loss", "learning_rate": "learning_rate",
    "advantages/max_abs_gap_vs_reference": "advantage_gap",
}


class MetricsJsonlCallback(TrainerCallback):
    """Appends one JSON row per logged training step to ``metrics.jsonl`` (canonical names + raw TRL keys)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._step_started = time.perf_counter()

    def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001 (transformers' signature)
        self._step_started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        row: dict[str, Any] = {"step": state.global_step, "seconds": time.perf_counter() - self._step_started}
        row.update({new: logs[old] for old, new in METRIC_NAMES.items() if old in logs})
        row["trl"] = {k: v for k, v in logs.items() if k not in METRIC_NAMES}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fh.write(json.dumps(row, sort_keys=True) + "\n")


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of ``<run_dir>/metrics.jsonl`` (latest row per step wins, so resumed runs read cleanly)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no training metrics at {path}: run `codegrep train` first")
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["step"]] = row
    return [rows[k] for k in sorted(rows)]

"""The training-curve panels: which metrics.jsonl columns notebook 03 and ``codegrep curves`` draw, and how
they are labelled (a light module: ``codegrep curves --help`` lists them without importing torch)."""
from __future__ import annotations

CURVE_PANELS = (("task_reward", "task reward (F0.5 + w·format)", "reward"), ("f_beta", "F0.5 of the submitted set", "F0.5"),
                ("rounds", "rounds per episode", "rounds"), ("tokens", "generated tokens per episode", "tokens"),
                ("kl", "KL to the initial policy", "KL (nats/token)"))
"""Notebook 03's training curves: (metrics.jsonl column, what it shows, axis unit)."""
PANELS = {col: (what, unit) for col, what, unit in CURVE_PANELS} | {
    "kl_exact": ("exact probe KL to the initial policy", "KL (nats/token)"),
    "tool_calls": ("tool calls per episode", "calls"),
    "seconds": ("wall time per GRPO step", "seconds"),
    "time_generation_s": ("rollout (generation) time per step", "seconds"),
    "time_loss_s": ("loss forward + backward time per step", "seconds"),
    "generation_tokens_per_s": ("rollout throughput", "generated tokens / s"),
    "tied_group_share": ("groups whose task rewards all tie", "share of groups"),
    "efficiency_cost": ("efficiency cost per episode", "cost"),
    "loss": ("GRPO loss", "loss"),
}
"""Every panel ``codegrep curves`` can draw, by metrics.jsonl column (docs/training.md lists the columns)."""

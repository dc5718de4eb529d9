"""The paper's reported values: REFERENCE numbers only, never used as results.

Every table or figure that shows one of these labels it "paper (reference)".
"""
from __future__ import annotations

PAPER_REFERENCE = {
    "mining.n_trajectories": 67_000,
    "ablation.kl_ratio_advantage_over_reward": 1 / 3,
    "precision.codegrep": 0.677,
    "precision.bm25": 0.375,
    "precision.jina": 0.445,
    # The paper places the threshold between Jina (0.445, neutral) and CodeGrep (0.677, crosses it): an
    # interval (0.445, 0.677], not a number; report.py prints it as such.
    "precision.threshold_interval": (0.445, 0.677),
    "downstream.resolve_without": 0.258,
    "downstream.resolve_with": 0.270,
    "downstream.rounds_change": -0.15,
    "downstream.tokens_resolved_change": -0.19,
    "downstream.n_instances": 500,
}
"""Values as stated in the paper (fractions, not percent)."""

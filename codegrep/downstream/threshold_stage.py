"""Notebook 05's stage (the precision threshold as a measured bracket), in the shape every notebook calls
(``codegrep.Stage``): ``run(cfg, out) -> ThresholdStage``, ``figures(result, out, *names)``, ``headline(result)``.

The bracket's two curves are a replay MODEL and an observational FIT on the real recorded runs; both words stay on
every number and figure (``codegrep.downstream.stages``, ``codegrep.downstream.figures``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from codegrep.downstream import figures as figs
from codegrep.downstream import stages

NOTEBOOK = "05_precision_threshold"


@dataclass
class ThresholdStage:
    """The real runs, the bracket (``stages.bracket_stage``), the retrievers' harness rows and P@k comparison, and
    the downstream table placing each retriever on the bracket."""

    config: Any
    """``ThresholdConfig`` (``downstream.threshold``)."""
    setup: stages.ReplaySetup
    runs: pd.DataFrame
    bracket: dict[str, Any]
    results: dict[str, pd.DataFrame]
    harness: pd.DataFrame
    comparison: pd.DataFrame | None
    table: pd.DataFrame

    def comparison_shown(self) -> pd.DataFrame:
        """The harness's P@k / precision@agent comparison as the notebook shows it (n/a where undefined)."""
        cols = ["retriever", "n"] + [f"{m}{s}" for m in ("p@1", "p@2", "p@3", "precision@agent") for s in ("", "_lo", "_hi")]
        shown = self.comparison.reindex(columns=cols + ["n_agent_size", "agent_non_submits"]).round(3)
        return shown.astype(object).where(shown.notna(), "n/a")

    def table_shown(self) -> pd.DataFrame:
        shown = self.table.reindex(columns=["retriever", "n", "precision", "precision_lo", "precision_hi", "recall",
                                            "mean_files", "instance_source", "verdict_tokens"]).round(3)
        return shown.astype(object).where(shown.notna(), "n/a")

    def conclusion(self) -> str:
        return stages.bracket_conclusion(self.bracket, self.table)


def run(cfg: dict[str, Any], out: Any) -> ThresholdStage:
    """The real runs per repository, the bracket on them, and every retriever of the profile evaluated by the
    harness and replayed on its own instances; saves every table."""
    tc = stages.threshold_config(cfg)
    setup = stages.replay_setup(cfg)
    runs = stages.runs_summary(setup, tc.window_cap)
    out.table(runs, "05_runs_by_repo")
    out.table(setup.params_table(), "05_replay_params")
    st = stages.bracket_stage(cfg, out, setup)
    results, harness = stages.retriever_results(cfg, out)
    comparison = stages.retriever_comparison(results, out, seed=tc.seed)
    table = stages.retriever_table(cfg, out, setup, st["bracket"], results, "05")
    return ThresholdStage(tc, setup, runs, st, results, harness, comparison, table)


FIGURES = {
    "effects": (lambda r: figs.effects_figure(r.bracket["effects"], r.bracket["n_runs"]), "05_observational_effects",
                None),
    "validation": (lambda r: figs.validation_figure(r.bracket["validation"]), "05_validation_held_out_repos", None),
    "bracket": (lambda r: figs.bracket_figure(r.bracket["bracket"], r.table, r.bracket["paper_threshold_interval"],
                                              r.bracket["effects"], r.bracket["validation_pooled"]),
                "05_precision_bracket", None),
}
"""name -> (drawing function, saved file name, note stamped on the figure)."""


def figures(result: ThresholdStage, out: Any, *names: str) -> dict[str, Any]:
    """Draw and save the named figures (all when none are named); returns them by name."""
    from codegrep.plots import draw

    return draw(FIGURES, result, out, names)


def headline(result: ThresholdStage) -> dict[str, Any]:
    """Notebook 05's headline record (``Outputs.headline`` keywords): numbers, per-key sources and reasons."""
    numbers = stages.threshold_headline(result.bracket, result.table, result.comparison)
    sources, reasons = stages.headline_labels(numbers, result.table.loc[result.table["n"] > 0, "retriever"],
                                              result.comparison is not None)
    return {"numbers": numbers, "source": "model", "sources": sources, "reasons": reasons}

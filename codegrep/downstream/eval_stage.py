"""Notebook 06's stage (what each retriever's files do to a frozen coding agent), in the shape every notebook
calls (``codegrep.Stage``): ``run(cfg, out, hint_results=None) -> DownstreamStage``, ``figures(result, out,
*names)``, ``headline(result)``.

No agent runs here: each retriever's own files are replayed on the recorded runs (MODEL) and the fitted effects
added (FIT); real hint-experiment runs, where they exist, are summarised beside."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from codegrep.downstream import figures as figs
from codegrep.downstream import stages
from codegrep.paper import PAPER_REFERENCE

NOTEBOOK = "06_downstream_eval"
TABLE_COLUMNS = ["retriever", "n", "instance_source", "precision", "rounds_change", "rounds_change_lo",
                 "rounds_change_hi", "rounds_change_observational", "rounds_change_observational_lo",
                 "rounds_change_observational_hi", "tokens_resolved_change", "tokens_resolved_change_lo",
                 "tokens_resolved_change_hi", "tokens_resolved_change_observational",
                 "tokens_resolved_change_observational_lo", "tokens_resolved_change_observational_hi",
                 "resolve_recorded", "resolve_model_without", "resolve_model_with", "resolve_change_observational",
                 "resolve_change_observational_lo", "resolve_change_observational_hi", "verdict_tokens"]
"""The downstream table's columns, as notebook 06 shows them beside the paper's row."""


@dataclass
class DownstreamStage:
    """The bracket (as in notebook 05), each retriever's replayed table, that table beside the paper's row, and
    the real hint experiment's summary (None when none has run)."""

    cfg: dict[str, Any]
    setup: stages.ReplaySetup
    bracket: dict[str, Any]
    results: dict[str, pd.DataFrame]
    harness: pd.DataFrame
    table: pd.DataFrame
    with_reference: pd.DataFrame
    hints: dict[str, Any] | None

    def hints_lines(self) -> str:
        """What the real hint experiment holds, or that none has been run here."""
        h = self.hints
        if h is None:
            return ("no hint-experiment results in this run's artifacts/downstream/hints: none has been run here (it "
                    "needs a model endpoint); the MODEL/FIT table above stands alone.")
        return f"{h['n_instances']} instances, {h['n_runs']} real runs ({h['n_failed']} failed); crossing: {h['crossing']}"

    def hints_table(self) -> pd.DataFrame | None:
        return None if self.hints is None else self.hints["paired"].round(3)

    def table_shown(self) -> pd.DataFrame:
        """The downstream table beside the paper's row, n/a where a value does not apply."""
        shown = self.with_reference
        return shown.round(3).astype(object).where(shown.notna(), "n/a")

    def conclusion(self) -> str:
        return stages.downstream_conclusion(self.table, self.bracket)


def run(cfg: dict[str, Any], out: Any, hint_results: str | Path | None = None) -> DownstreamStage:
    """The bracket, each retriever's own files replayed on its instances' recorded runs, and the hint experiment
    in ``hint_results`` (default ``<artifacts>/downstream/hints``) when it exists; saves every table."""
    from codegrep.downstream.hints import summarize_hint_experiment

    setup = stages.replay_setup(cfg)
    st = stages.bracket_stage(cfg, out, setup)
    results, harness = stages.retriever_results(cfg, out)
    table = stages.retriever_table(cfg, out, setup, st["bracket"], results, "06")
    shown = pd.concat([table.reindex(columns=TABLE_COLUMNS).assign(source="replay MODEL / observational FIT"),
                       pd.DataFrame([stages.paper_row()])], ignore_index=True)
    out.table(shown, "06_downstream_table_with_reference")
    hint_path = Path(hint_results) if hint_results else Path(out.artifacts) / "downstream" / "hints"
    hints = summarize_hint_experiment(hint_path if hint_path.exists() else None, seed=int(cfg.get("seed", 0)))
    if hints is not None:
        out.table(hints["by_precision"], "06_hint_experiment_by_precision")
        out.table(hints["paired"], "06_hint_experiment_paired")
    return DownstreamStage(cfg, setup, st, results, harness, table, shown, hints)


FIGURES = {
    "cost": (lambda r: figs.downstream_figure(r.table, PAPER_REFERENCE), "06_cost_change_by_retriever", None),
    "resolve": (lambda r: figs.resolve_figure(r.table, PAPER_REFERENCE), "06_resolve_by_retriever", None),
}
"""name -> (drawing function, saved file name, note stamped on the figure)."""


def figures(result: DownstreamStage, out: Any, *names: str) -> dict[str, Any]:
    """Draw and save the named figures (all when none are named); returns them by name."""
    from codegrep.plots import draw

    return draw(FIGURES, result, out, names)


def headline(result: DownstreamStage) -> dict[str, Any]:
    """Notebook 06's headline record (``Outputs.headline`` keywords): numbers, per-key sources and reasons."""
    numbers = stages.downstream_headline(result.cfg, result.table, result.bracket)
    numbers["hint_experiment_runs"] = 0 if result.hints is None else result.hints["n_runs"]
    sources, reasons = stages.headline_labels(numbers, result.table.loc[result.table["n"] > 0, "retriever"])
    return {"numbers": numbers, "source": "model", "sources": sources, "reasons": reasons}

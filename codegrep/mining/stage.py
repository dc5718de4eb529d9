"""Notebook 01's stage (CATM mining), in the shape every notebook calls (``codegrep.Stage``):
``run(cfg, out) -> MiningStage``, ``figures(result, out, *names)``, ``headline(result)``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

NOTEBOOK = "01_mining"


@dataclass
class MiningStage:
    """What the mining stage measured: the mined records and the tables the notebook shows (all saved)."""

    cfg: dict[str, Any]
    mined: Any
    """``codegrep.mining.catm.MiningResult`` (records, stats, paths)."""
    funnel: pd.DataFrame
    per_format: pd.DataFrame
    distributions: pd.DataFrame
    gold: dict[str, Any]

    @property
    def stats(self) -> dict[str, Any]:
        return self.mined.stats


def run(cfg: dict[str, Any], out: Any) -> MiningStage:
    """Mine the profile's trajectories (``mining:`` section, cached) and save the funnel, per-format,
    distribution and gold-agreement tables."""
    from codegrep.mining import summary
    from codegrep.mining.catm import mine_profile

    mined = mine_profile(cfg, out)
    result = MiningStage(cfg, mined, summary.funnel(mined.stats), summary.per_format(mined.records),
                         summary.distributions(mined.records), summary.gold_agreement(mined.records))
    out.table(result.funnel, "01_mining_funnel")
    out.table(result.per_format, "01_mining_per_format")
    out.table(result.distributions, "01_mining_distributions")
    out.json({"gold": result.gold, "stats": mined.stats}, "01_mining_summary")
    return result


def funnel_figure(result: MiningStage) -> Any:
    """The nested funnel, trajectories down to useful records (real)."""
    from codegrep import plots

    fun = result.funnel
    fig, ax = plots.subplots(width=6)
    ax.barh(fun["stage"][::-1], fun["count"][::-1])
    for y, v in enumerate(fun["count"][::-1]):
        ax.text(v, y, f" {v:,}", va="center")
    ax.set_xlabel("trajectories")
    ax.set_ylabel("stage")
    plots.integer_ticks(ax, "x")
    plots.title(ax, "CATM mining funnel", data=f"real trajectories, profile {result.cfg['profile']}",
                n=int(fun["count"][0]), unit="trajectories")
    return fig


DISTRIBUTION_PANELS = (("n_viewed_files", "files viewed", True),
                       ("n_edited_files", "files edited (scratch included)", True),
                       ("steps_to_first_target_view", "steps to first target view", True),
                       ("wasted_read_share", "share of reads on non-target files", False))
"""(column, label, integer counts) per panel of the distributions figure."""


def distributions_figure(result: MiningStage) -> Any:
    """Per-record distributions over useful records (real); an empty panel says why."""
    from codegrep import plots
    from codegrep.mining import summary

    dist = result.distributions
    xlabels = {"wasted_read_share": "share of reads (0 to 1)"}
    fig, axes = plots.subplots(1, 4, width=14)
    for ax, (col, label, counts) in zip(axes, DISTRIBUTION_PANELS):
        values = dist[col].dropna()
        if values.empty:
            plots.undefined(ax, label, "no useful record has this value")
            continue
        ax.hist(values, bins=summary.hist_bins(values, integer=counts))
        ax.set_xlabel(xlabels.get(col, label))
        ax.set_ylabel("useful records")
        plots.integer_ticks(ax, "both" if counts else "y")
        plots.title(ax, label, data="real", n=len(values), unit="records")
    fig.suptitle(f"Per-record distributions over useful records (real trajectories, profile {result.cfg['profile']})")
    return fig


FIGURES = {"funnel": (funnel_figure, "01_mining_funnel", lambda r: f"real trajectories, profile {r.cfg['profile']}"),
           "distributions": (distributions_figure, "01_mining_distributions", None)}
"""name -> (drawing function, saved file name, note stamped on the figure: text, a function of the result, or None)."""


def figures(result: MiningStage, out: Any, *names: str) -> dict[str, Any]:
    """Draw and save the named figures (all when none are named); returns them by name."""
    from codegrep.plots import draw

    return draw(FIGURES, result, out, names)


def headline(result: MiningStage) -> dict[str, Any]:
    """Notebook 01's headline record (``Outputs.headline`` keywords): the funnel's own numbers (headline =
    figure), gold agreement and the distributions' medians."""
    stats, gold, dist = result.stats, result.gold, result.distributions
    counts = {s: int(v) for s, v in zip(result.funnel["stage"], result.funnel["count"])}
    numbers = {"trajectories": counts["trajectories"], "parsed": counts["parsed"],
               "resolved": counts["resolved"], "useful_records": counts["useful records"],
               "matched_to_task": stats["matched"], "demonstrations": stats["demonstrations"],
               "formats": len(stats["formats"]), "gold_precision": gold["precision"], "gold_recall": gold["recall"],
               "gold_n": gold["n"], "median_steps_to_first_target_view": dist["steps_to_first_target_view"].median(),
               "median_wasted_read_share": dist["wasted_read_share"].median()}
    reasons = {"matched_to_task": "no task file given (mining.tasks is null)"} if stats["matched"] is None else None
    return {"numbers": numbers, "source": "run", "reasons": reasons}

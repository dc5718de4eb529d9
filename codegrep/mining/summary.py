"""Tables the mining notebook shows (funnel, per-format breakdown, distributions, gold agreement)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from codegrep.metrics import precision_recall


def funnel(stats: dict[str, Any], records: pd.DataFrame | None = None) -> pd.DataFrame:
    """Nested funnel from the run's stats (so it agrees with the stats, the headline and the report):
    trajectories read -> parsed -> resolved (harness verdict known and positive) -> useful records
    (resolved, with at least one target file). Matching to a task is not a stage (it does not filter):
    see ``stats["matched"]`` and ``per_format``.

    >>> funnel({"read": 5, "parsed": 4, "resolved": 3, "useful": 2})["count"].tolist()
    [5, 4, 3, 2]
    """
    stages = [("trajectories", stats["read"]), ("parsed", stats["parsed"]), ("resolved", stats["resolved"]),
              ("useful records", stats["useful"])]
    return pd.DataFrame(stages, columns=["stage", "count"])


def per_format(records: pd.DataFrame) -> pd.DataFrame:
    """Counts and medians per source format."""
    g = records.groupby("source_format")
    return pd.DataFrame({"trajectories": g.size(), "matched": g["matched"].sum(), "resolved": g["resolved"].apply(lambda s: int((s == True).sum())),  # noqa: E712
                         "useful": g["useful"].sum(), "patch_from_actions": g["patch_source"].apply(lambda s: int((s == "actions").sum())),
                         "median_steps": g["n_steps"].median(), "median_viewed_files": g["n_viewed_files"].median(),
                         "median_target_files": g["n_target_files"].median(),
                         "median_wasted_read_share": g["wasted_read_share"].median()}).reset_index()


DISTRIBUTION_COLUMNS = ["n_steps", "n_tokens", "n_viewed_files", "n_edited_files", "n_target_files",
                        "n_context_files", "steps_to_first_target_view", "n_views", "n_target_views",
                        "wasted_read_share"]


def distributions(records: pd.DataFrame, useful_only: bool = True) -> pd.DataFrame:
    """Per-record distribution columns the downstream cost model reads (one row per record)."""
    rows = records[records["useful"]] if useful_only else records
    return rows[["instance_id", "trajectory_id", "source_format", "resolved"] + DISTRIBUTION_COLUMNS].reset_index(drop=True)


def hist_bins(values: Any, integer: bool, max_bins: int = 20) -> Any:
    """Histogram bin edges: for counts, edges at half-integers so each bar sits on whole numbers (wider
    integer bins when the range is large); for shares, ``max_bins`` even bins.

    >>> hist_bins([1, 2, 4], True).tolist()
    [0.5, 1.5, 2.5, 3.5, 4.5]
    """
    import numpy as np

    v = np.asarray(list(values), dtype=float)
    if not integer or not len(v):
        return max_bins
    lo, hi = int(np.floor(v.min())), int(np.ceil(v.max()))
    width = max(1, int(np.ceil((hi - lo + 1) / max_bins)))
    return np.arange(lo, hi + width + 1, width) - 0.5


def gold_agreement(records: pd.DataFrame) -> dict[str, Any]:
    """Macro precision/recall of mined targets vs gold files on useful records that carry gold files."""
    rows = records[records["useful"] & records["gold_files"].map(lambda g: g is not None and len(g) > 0)]
    if rows.empty:
        return {"n": 0, "precision": None, "recall": None}
    pr = [precision_recall(list(t), list(g)) for t, g in zip(rows["target_files"], rows["gold_files"])]
    return {"n": len(pr), "precision": sum(p for p, _ in pr) / len(pr), "recall": sum(r for _, r in pr) / len(pr)}

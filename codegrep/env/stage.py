"""Notebook 02's stage (the Docker-free environment), in the shape every notebook calls (``codegrep.Stage``):
``run(cfg, out) -> EnvironmentStage``, ``figures(result, out, *names)``, ``headline(result)``.

Every number is measured in the run on the profile's benchmark repository (``env.bench``); rollouts are
scripted tool-call workloads (no model), and every figure says so."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

NOTEBOOK = "02_environment"
SCRIPTED = "scripted rollouts, no model"
METHOD_LABELS = {"clone": "clone per rollout (CodeScout, local mirror)", "pool": "worktree mode (pooled worktree)",
                 "objects": "objects mode (default: git objects + blob store)"}
GROUPS = list(range(1, 17))
"""Group sizes G of the acquisition-per-rollout curve."""


@dataclass
class EnvironmentStage:
    """What the environment benchmark measured (``codegrep.env.bench.profile_environment``) and the profile's
    task statistics."""

    summary: dict[str, Any]
    acquisition: pd.DataFrame
    calls: pd.DataFrame
    throughput: pd.DataFrame
    task_stats: dict[str, Any]

    @property
    def n_cold(self) -> int:
        """Cold acquisition samples per method."""
        a = self.acquisition
        return int((a["phase"] == "cold").sum() / a["method"].nunique())

    def summary_table(self) -> pd.DataFrame:
        from codegrep.env.bench import summary_table

        return summary_table(self.summary)


def run(cfg: dict[str, Any], out: Any) -> EnvironmentStage:
    """Measure acquisition, tool latency, load and throughput on the profile's ``env.bench`` repository, and
    the statistics of the profile's task set; saves every table."""
    from codegrep.data.stats import task_stats
    from codegrep.data.tasks import profile_tasks
    from codegrep.env.bench import profile_environment

    res = profile_environment(cfg, progress=False)
    tasks, _ = profile_tasks(cfg)
    result = EnvironmentStage(res["summary"], res["acquisition"], res["calls"], res["throughput"], task_stats(tasks))
    out.json(result.summary, "02_environment_bench")
    out.table(result.acquisition, "02_environment_acquisition")
    out.table(result.calls, "02_environment_calls")
    out.table(result.throughput, "02_environment_throughput")
    out.table(result.task_stats["per_repo"], "02_environment_task_repos")
    return result


def acquisition_figure(result: EnvironmentStage) -> Any:
    """What a rollout waits for before its first tool call vs group size G (log scale), per mode, from the
    measured cold and warm medians; the dotted line adds the background blob-store fill."""
    from codegrep import plots
    from codegrep.env.bench import acquisition_vs_group

    summary, acq = result.summary, result.summary["acquisition"]
    curve = acquisition_vs_group({m: acq[m] for m in ("clone", "pool", "objects")}, GROUPS)
    fig, ax = plots.subplots(width=9.5, height=3.8)
    for m, grp in curve.groupby("method", sort=False):
        ax.plot(grp["group"], grp["per_rollout_ms"], marker="o", ms=3, label=METHOD_LABELS[m])
        if m == "objects":
            ax.plot(grp["group"], grp["work_per_rollout_ms"], ls=":", color=ax.lines[-1].get_color(),
                    label="objects mode, incl. background blob-store fill")
    if not plots.log_axis_positive(curve["per_rollout_ms"]):
        raise ValueError("acquisition per rollout has a zero: it cannot go on a log axis")
    ax.set_yscale("log")
    ax.axvline(summary["settings"]["group"], color="0.6", lw=0.8)
    ax.set_xlabel("rollouts sharing one commit, G (count)")
    ax.set_ylabel("acquisition per rollout (ms, log scale)")
    plots.integer_ticks(ax, "x")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)  # outside: no curve hidden
    plots.title(ax, f"Acquisition per rollout vs group size; x{summary['clone_per_rollout_vs_default']:.0f} at "
                f"G={summary['settings']['group']} ({summary['repo']['files']:,}-file repository)",
                f"{summary['repo']['data']} repository, measured", result.n_cold, "cold samples per method")
    return fig


def latency_figure(result: EnvironmentStage) -> Any:
    """Tool-call latency CDFs per mode: isolated calls and calls under full concurrency."""
    from codegrep import plots

    fig, ax = plots.subplots(width=7, height=3.5)
    for (mode, setting), grp in result.calls.groupby(["mode", "setting"]):
        lat = np.sort(grp["latency_ms"].to_numpy())
        ax.plot(lat, np.arange(1, len(lat) + 1) / len(lat), label=f"{mode}, {setting}",
                ls="-" if setting == "isolated" else "--", color="C1" if mode == "worktree" else "C2")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log)")
    ax.set_ylabel("fraction of calls")
    ax.legend()
    plots.title(ax, f"Tool latency ({result.summary['settings']['concurrency']} concurrent rollouts when loaded)",
                f"{result.summary['repo']['data']} repository, measured", len(result.calls), "tool calls")
    return fig


def throughput_figure(result: EnvironmentStage) -> Any:
    from codegrep.env.bench import throughput_figure as draw

    return draw(result.throughput, result.summary)


DISK_METHODS = ("clone", "worktree", "pool", "objects")


def disk_figure(result: EnvironmentStage) -> Any:
    """Disk written per rollout per method (linear axis: bar lengths mean something)."""
    from codegrep import plots

    summary, acq = result.summary, result.summary["acquisition"]
    group = summary["settings"]["group"]
    labels = {"clone": "clone per\nrollout", "worktree": "worktree per\nrollout",
              "pool": f"pooled worktree\n(G={group})", "objects": f"objects: blob store\n(G={group})"}
    disk_mb = [acq[m]["disk_per_rollout_bytes"] / 1e6 for m in DISK_METHODS]
    fig, ax = plots.subplots(width=7.2, height=3.2)
    bars = ax.bar([labels[m] for m in DISK_METHODS], disk_mb)
    ax.bar_label(bars, labels=[f"{v:.2f} MB" for v in disk_mb], fontsize=8)
    ax.set_ylabel("disk written per rollout (MB)")
    plots.title(ax, "Disk written per rollout (a fresh store per sample: the first commit of a repository)",
                f"{summary['repo']['data']} repository, measured", result.n_cold, "cold samples per method")
    return fig


FIGURES = {
    "acquisition": (acquisition_figure, "02_environment_acquisition",
                    f"measured in this run (medians of cold/warm acquisitions); {SCRIPTED}"),
    "latency": (latency_figure, "02_environment_latency_cdf", "measured in this run; scripted tool calls, no model"),
    "throughput": (throughput_figure, "02_environment_throughput", f"measured in this run; {SCRIPTED}"),
    "disk": (disk_figure, "02_environment_disk", "measured in this run; hard-linked mirror objects not counted"),
}
"""name -> (drawing function, saved file name, note stamped on the figure)."""


def figures(result: EnvironmentStage, out: Any, *names: str) -> dict[str, Any]:
    """Draw and save the named figures (all when none are named); returns them by name."""
    from codegrep.plots import draw

    return draw(FIGURES, result, out, names)


def headline(result: EnvironmentStage) -> dict[str, Any]:
    """Notebook 02's headline record (``Outputs.headline`` keywords)."""
    summary = result.summary
    acq, load, default = summary["acquisition"], summary["under_load"], summary["default_mode"]
    numbers = {
        "bench_repo_files": summary["repo"]["files"],
        "default_mode": default,
        "clone_per_rollout_vs_default": summary["clone_per_rollout_vs_default"],
        "clone_per_rollout_vs_default_all_work": summary["clone_per_rollout_vs_default_all_work"],
        "clone_vs_pool_acquisition_ratio": summary["ratios"]["clone_per_rollout_vs_pool"],
        "pool_per_rollout_ms": acq["pool"]["per_rollout_ms"],
        "objects_per_rollout_ms": acq["objects"]["per_rollout_ms"],
        "clone_per_rollout_ms": acq["clone"]["per_rollout_ms"],
        "tool_p50_ms": summary["tool_latency_isolated"][default]["p50_ms"],
        "tool_p99_ms": summary["tool_latency_isolated"][default]["p99_ms"],
        "loaded_p99_ms": load[default]["p99_ms"],
        "concurrent_rollouts": summary["settings"]["concurrency"],
        "timeouts_under_load": sum(summary["timeouts_under_load"].values()),
        "failures": sum(v["failures"] + v["timeouts_or_internal_errors"] for v in load.values()),
        "leaked_worktrees": summary["leaked_worktrees"],
        "recommended_mode": summary["recommended_mode"],
        "tasks": result.task_stats["summary"]["tasks"],
        "n_cold_samples": result.n_cold,
    }
    return {"numbers": numbers, "source": "run"}

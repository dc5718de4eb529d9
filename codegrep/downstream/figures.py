"""Figures of notebooks 05 and 06 (the bundle's style, ``codegrep.plots``): each reads alone.

Replay numbers are marked MODEL, observational ones FIT, retriever precision measured (real), paper values
reference; every band or bar says what interval it is.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from codegrep import plots
from codegrep.downstream.threshold import Bracket

_METRIC = {"tokens": ("tokens per run, change vs. no hint (%)", 100.0),
           "rounds": ("rounds per run, change vs. no hint (%)", 100.0),
           "resolve": ("resolve rate, change vs. no hint (points)", 100.0)}
_MODEL = {"replay": ("replay MODEL (lower bound: a wrong file costs only its read)", plots.PALETTE[0], "-"),
          "observational": ("observational FIT (upper bound: wrong files go with derailed runs)", plots.PALETTE[1], "--")}


def _paper_interval(ax: Any, interval: list[float]) -> None:
    ax.axvspan(interval[0], interval[1], color="0.85", alpha=0.6, zorder=0,
               label=f"paper: threshold in ({interval[0]:.3f}, {interval[1]:.3f}] (reference)")


def bracket_figure(br: Bracket, table: pd.DataFrame | None, paper_interval: list[float]) -> Any:
    """Expected change against slot precision for tokens, rounds and resolve: both curves with 95% cluster-
    bootstrap bands, their crossing points, the paper's interval, and the retrievers placed at their
    measured precision (on the replayed instances)."""
    fig, axes = plots.subplots(1, 3, width=15, height=5.4)
    n_runs = len(br.feats)
    for ax, metric in zip(axes, ("tokens", "rounds", "resolve")):
        label, scale = _METRIC[metric]
        _paper_interval(ax, paper_interval)
        for model, (mlabel, colour, ls) in _MODEL.items():
            c = br.curves[(br.curves.model == model) & (br.curves.metric == metric)]
            if model == "replay" and metric == "resolve":
                ax.plot(c.p, scale * c.change, ls, color=colour, lw=1, label="replay MODEL: keeps recorded verdicts (0)")
                continue
            ax.plot(c.p, scale * c.change, ls, color=colour, label=mlabel)
            ax.fill_between(c.p, scale * c.low, scale * c.high, color=colour, alpha=0.15,
                            label=f"{model}: {plots.interval_label('cluster bootstrap')} over instances")
            t = br.threshold(model, metric)
            if t["threshold"] == t["threshold"]:
                ax.axvline(t["threshold"], color=colour, ls=":", lw=1)
                ax.errorbar([t["threshold"]], [0], xerr=[[max(t["threshold"] - t["low"], 0)],
                                                         [max(t["high"] - t["threshold"], 0)]],
                            fmt="D", color=colour, capsize=3, ms=5,
                            label=f"p* {model} {t['threshold']:.2f} [{t['low']:.2f}, {t['high']:.2f}]")
        if table is not None and len(table) and "precision" in table:
            for i, r in enumerate(table[table["n"] > 0].dropna(subset=["precision"]).to_dict("records")):
                ax.axvline(r["precision"], color=plots.PALETTE[2 + i % 5], ls="-.", lw=1.2,
                           label=f"{r['retriever']}: precision {r['precision']:.2f} "
                                 f"[{r.get('precision_lo', r['precision']):.2f}, {r.get('precision_hi', r['precision']):.2f}]"
                                 f" (measured on the replayed instances, n = {r['n']})")
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xlim(0, 1)
        ax.set_xlabel("hint precision p (each of k slots a target file with prob. p)")
        ax.set_ylabel(label)
        plots.title(ax, f"{metric}: expected change, set size k = {br.config.set_size}",
                    "real runs, replay MODEL + observational FIT", n_runs, "runs")
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen.keys()), loc="outside lower center", ncol=3, fontsize=7)
    return fig


def effects_figure(effects: pd.DataFrame, n_runs: int) -> Any:
    """The fitted effects of W and H per outcome with 95% cluster-bootstrap intervals."""
    fig, axes = plots.subplots(1, 3, width=12, height=3.0)
    for ax, (outcome, g) in zip(axes, effects.groupby("outcome", sort=False)):
        y = np.arange(len(g))
        ax.errorbar(g["effect"], y, xerr=[g["effect"] - g["low"], g["high"] - g["effect"]], fmt="o", capsize=3,
                    label=f"FIT, {plots.interval_label('cluster bootstrap')}")
        ax.set_yticks(y, [f"{t} (+1)" for t in g["term"]])
        ax.set_ylim(-0.6, len(g) - 0.4)
        ax.axvline(0, color="0.3", lw=0.8)
        ax.set_xlabel(f"effect on {outcome.replace('_', ' ')} ({g['scale'].iloc[0]})")
        plots.title(ax, f"{outcome.replace('_', ' ')}", "fit", n_runs, "runs")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", fontsize=7)
    fig.suptitle("Observational FIT on real runs: W = wrong files opened in the window, H = first file opened is a target",
                 fontsize=9)
    return fig


def validation_figure(val: pd.DataFrame) -> Any:
    """Held-out-repository error of the fit beside the no-skill baseline (the training runs' mean)."""
    fig, axes = plots.subplots(1, 2, width=10, height=3.2)
    for ax, (outcome, g) in zip(axes, val.groupby("outcome", sort=False)):
        x = np.arange(len(g))
        ax.bar(x - 0.2, g["mae_model"], 0.4, label="FIT (covariates, W, H)")
        ax.bar(x + 0.2, g["mae_no_skill"], 0.4, label="no-skill baseline (training mean)")
        ax.set_xticks(x, [f"{r.split('/')[-1]}\n(n={n})" for r, n in zip(g["held_out_repo"], g["n_runs"])])
        unit = "rounds" if outcome == "rounds_after" else "log tokens"
        ax.set_ylabel(f"mean absolute error ({unit})")
        plots.title(ax, f"held-out repository: {outcome.replace('_', ' ')}", "fit", int(g["n_runs"].sum()), "runs")
    axes[0].legend(fontsize=7)
    fig.suptitle("Check that can fail: FIT on the other repositories (no repository effect) predicts each held-out one",
                 fontsize=9)
    return fig


def downstream_figure(table: pd.DataFrame, paper: dict[str, float]) -> Any:
    """Per retriever, on its replayed instances: rounds and tokens-on-resolved change, replay MODEL and
    observational FIT, with 95% cluster-bootstrap intervals; the paper's values as reference lines."""
    fig, axes = plots.subplots(1, 2, width=12, height=3.6)
    table = table[table["n"] > 0].reset_index(drop=True)
    if not len(table):
        for ax in axes:
            plots.undefined(ax, "cost change per retriever", "no retriever output on an instance with a recorded run")
        return fig
    x = np.arange(len(table))
    for ax, (col, title, ref) in zip(axes, (("rounds_change", "rounds", "downstream.rounds_change"),
                                           ("tokens_resolved_change", "tokens on resolved runs",
                                            "downstream.tokens_resolved_change"))):
        for off, (suffix, model) in zip((-0.18, 0.18), (("", "replay"), ("_observational", "observational"))):
            v = table[f"{col}{suffix}"] * 100
            err = [v - table[f"{col}{suffix}_lo"] * 100, table[f"{col}{suffix}_hi"] * 100 - v]
            ax.errorbar(x + off, v, yerr=err, fmt="o" if model == "replay" else "s", capsize=3,
                        color=_MODEL[model][1], label=f"{_MODEL[model][0].split(' (')[0]}, 95% cluster-bootstrap CI")
        ax.axhline(100 * paper[ref], color="0.4", ls=":", label=f"paper {100 * paper[ref]:+.0f}% (reference, OpenHands, 500)")
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xticks(x, [f"{r}\n(n={n})" for r, n in zip(table["retriever"], table["n"])])
        ax.set_ylabel(f"{title}: change vs. no hint (%)")
        plots.title(ax, f"{title}: change with each retriever's own files",
                    "real SWE-bench Verified runs, MODEL/FIT", int(table["n"].max()) if len(table) else 0)
    axes[0].legend(fontsize=7)
    fig.suptitle("Replay MODEL of the recorded runs and observational FIT (effects of W, H), each retriever's own files",
                 fontsize=9)
    return fig


def resolve_figure(table: pd.DataFrame, paper: dict[str, float]) -> Any:
    """Resolve rate per retriever: recorded (measured), modelled without and with the hint (FIT)."""
    fig, ax = plots.subplots(1, 1, width=10, height=3.4)
    table = table[table["n"] > 0].reset_index(drop=True)
    if not len(table):
        plots.undefined(ax, "resolve rate per retriever", "no retriever output on an instance with a recorded run")
        return fig
    x = np.arange(len(table))
    ax.bar(x - 0.25, 100 * table["resolve_recorded"], 0.25, label="recorded verdicts (measured, no hint)", color="0.6")
    for off, col, lab, colour in ((0.0, "resolve_model_without", "FIT without hint", plots.PALETTE[0]),
                                  (0.25, "resolve_model_with", "FIT with the retriever's files", plots.PALETTE[1])):
        v = 100 * table[col]
        ax.bar(x + off, v, 0.25, color=colour, label=f"{lab}, 95% cluster-bootstrap CI",
               yerr=[v - 100 * table[f"{col}_lo"], 100 * table[f"{col}_hi"] - v], capsize=3)
    ax.axhline(100 * paper["downstream.resolve_without"], color="0.4", ls=":",
               label=f"paper without {100 * paper['downstream.resolve_without']:.1f}% (reference, other agent, 500)")
    ax.set_xticks(x, [f"{r}\n(n={n})" for r, n in zip(table["retriever"], table["n"])])
    ax.set_ylabel("resolve rate (%)")
    ax.set_ylim(0, 100)
    plots.title(ax, "Resolve rate: recorded and modelled", "real SWE-bench Verified runs, FIT",
                int(table["n"].max()) if len(table) else 0)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Resolve FIT: logistic regression on W, H and instance covariates over 400 real runs", fontsize=9)
    return fig

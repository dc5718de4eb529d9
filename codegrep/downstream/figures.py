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
_MODEL = {"replay": ("replay MODEL (lower bound)", plots.PALETTE[0], "-"),
          "observational": ("observational FIT (upper bound)", plots.PALETTE[1], "--")}
_OUTCOME = {"tokens": "log_tokens_after", "rounds": "rounds_after", "resolve": "resolved"}
_HARM = {"tokens": 1, "rounds": 1, "resolve": -1}
"""Sign of a harmful effect per metric (more tokens/rounds, less resolve)."""


def fit_story(effects: pd.DataFrame, metric: str) -> str:
    """What drives the FIT curve below zero at low precision, read from the fitted effects (never typed in):
    a wrong file's own effect W when its interval is on the harmful side, else the loss of H (opening a target
    first), which a hint without a hit removes after its wrong read (``threshold.hinted_run``).

    >>> e = pd.DataFrame([{"outcome": "rounds_after", "term": "W", "effect": -2.96, "low": -11.4, "high": 5.4,
    ...                    "scale": "rounds"},
    ...                   {"outcome": "rounds_after", "term": "H", "effect": -6.0, "low": -9.0, "high": -3.0,
    ...                    "scale": "rounds"}])
    >>> fit_story(e, "rounds")
    'W (wrong file) -2.96 [-11.40, +5.40] rounds: no harm shown; the crossing comes from losing H (target first) -6.00 [-9.00, -3.00] after a wrong read'
    >>> fit_story(e.assign(high=[5.4, 3.4]), "rounds").split(": ")[0]
    'W (wrong file) -2.96 [-11.40, +5.40] rounds and H (target first) -6.00 [-9.00, +3.40]'
    >>> fit_story(e.assign(low=[1.0, -9.0], high=[4.0, -3.0], effect=[2.0, -6.0]), "rounds").split(":")[0]
    'W (wrong file) +2.00 [+1.00, +4.00] rounds'
    """
    g = effects[effects["outcome"] == _OUTCOME[metric]].set_index("term")
    if "W" not in g.index or "H" not in g.index:
        return "effects not fitted"
    w, h, sign = g.loc["W"], g.loc["H"], _HARM[metric]
    wtxt = f"W (wrong file) {w['effect']:+.2f} [{w['low']:+.2f}, {w['high']:+.2f}] {w['scale']}"
    harmful = (w["low"] > 0) if sign > 0 else (w["high"] < 0)
    if harmful:
        return f"{wtxt}: wrong files go with costlier runs"
    htxt = f"H (target first) {h['effect']:+.2f} [{h['low']:+.2f}, {h['high']:+.2f}]"
    helps = (h["high"] < 0) if sign > 0 else (h["low"] > 0)
    if helps:
        return f"{wtxt}: no harm shown; the crossing comes from losing {htxt} after a wrong read"
    return (f"{wtxt} and {htxt}: neither interval excludes 0, so the crossing rests on point estimates "
            "(mostly the loss of H after a wrong read)")


def validation_caveat(validation_pooled: dict[str, Any] | None, metric: str) -> str:
    """'' when the metric's fit beats the no-skill baseline on held-out repositories, else the caveat.

    >>> validation_caveat({"rounds_after.mae_model": 13.30, "rounds_after.mae_no_skill": 13.18}, "rounds")
    'FIT fails its held-out check (13.30 vs no-skill 13.18): p* not evidence'
    >>> validation_caveat({"rounds_after.mae_model": 10.0, "rounds_after.mae_no_skill": 13.18}, "rounds")
    ''
    """
    key = _OUTCOME.get(metric)
    v = validation_pooled or {}
    m, b = v.get(f"{key}.mae_model"), v.get(f"{key}.mae_no_skill")
    if m is None or b is None or m < b:
        return ""
    return f"FIT fails its held-out check ({m:.2f} vs no-skill {b:.2f}): p* not evidence"


def _paper_interval(ax: Any, interval: list[float]) -> None:
    ax.axvspan(interval[0], interval[1], color="0.85", alpha=0.6, zorder=0,
               label=f"paper: threshold in ({interval[0]:.3f}, {interval[1]:.3f}] (reference)")


def _paper_retrievers(ax: Any) -> None:
    """The paper's three retrievers at their reported precision (references), marked on the x axis."""
    from codegrep.paper import PAPER_REFERENCE

    for i, (name, key) in enumerate((("BM25", "precision.bm25"), ("Jina", "precision.jina"),
                                     ("CodeGrep", "precision.codegrep"))):
        p = PAPER_REFERENCE[key]
        ax.plot([p], [0], marker="v", color="0.25", ms=7, clip_on=False, transform=ax.get_xaxis_transform(),
                zorder=5)
        ax.annotate(f"{name} {p}", (p, 0), xycoords=("data", "axes fraction"), xytext=(0, 9 + 9 * (i % 2)),
                    textcoords="offset points", ha="center", fontsize=6.5, color="0.25")


def bracket_figure(br: Bracket, table: pd.DataFrame | None, paper_interval: list[float],
                   effects: pd.DataFrame | None = None, validation_pooled: dict[str, Any] | None = None) -> Any:
    """Expected change against slot precision for tokens, rounds and resolve: both curves with 95% cluster-
    bootstrap bands, their crossing points, the paper's interval and its three retrievers (references, marked
    on the x axis), and this run's retrievers at their measured precision. Each panel's caption says what
    drives its FIT curve and whether the FIT passes its held-out check (from the numbers)."""
    fig, axes = plots.subplots(1, 3, width=15, height=5.0)
    n_runs = len(br.feats)
    shown = (table[table["n"] > 0].dropna(subset=["precision"]).to_dict("records")
             if table is not None and len(table) and "precision" in table else [])
    for ax, metric in zip(axes, ("tokens", "rounds", "resolve")):
        label, scale = _METRIC[metric]
        _paper_interval(ax, paper_interval)
        notes = []
        for model, (mlabel, colour, ls) in _MODEL.items():
            c = br.curves[(br.curves.model == model) & (br.curves.metric == metric)]
            if model == "replay" and metric == "resolve":
                ax.plot(c.p, scale * c.change, ls, color=colour, lw=1, label=mlabel)
                notes.append("MODEL keeps recorded verdicts: 0")
                continue
            ax.plot(c.p, scale * c.change, ls, color=colour, label=mlabel)
            ax.fill_between(c.p, scale * c.low, scale * c.high, color=colour, alpha=0.15)
            t = br.threshold(model, metric)
            if t["threshold"] == t["threshold"]:
                ax.errorbar([t["threshold"]], [0], xerr=[[max(t["threshold"] - t["low"], 0)],
                                                         [max(t["high"] - t["threshold"], 0)]],
                            fmt="D", color=colour, capsize=3, ms=5)
                notes.append(f"p* {'MODEL' if model == 'replay' else 'FIT'} "
                             f"{t['threshold']:.2f} [{t['low']:.2f}, {t['high']:.2f}]")
        for i, r in enumerate(shown):
            ax.axvline(r["precision"], color=plots.PALETTE[2 + i % 5], ls="-.", lw=1.2,
                       label=f"{r['retriever']} {r['precision']:.2f} (n={r['n']})")
        _paper_retrievers(ax)
        if effects is not None:
            notes.append(fit_story(effects, metric))
        caveat = validation_caveat(validation_pooled, metric) if metric != "resolve" else ""
        if caveat:
            notes.append(caveat)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xlim(0, 1)
        import textwrap

        ax.set_xlabel("hint precision p (share of the k files that are targets)\n"
                      + "\n".join(textwrap.fill(n, 80) for n in notes), fontsize=7.5)
        ax.set_ylabel(label)
        plots.title(ax, f"{metric}: expected change, k = {br.config.set_size}" + (" (FIT FAILS CHECK)" if caveat else ""),
                    "real runs, MODEL + FIT", n_runs, "runs")
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen.keys()), loc="outside lower center", ncol=min(len(seen), 6),
               fontsize=7, title=f"bands: {plots.interval_label('cluster bootstrap')} over instances; diamonds: p* "
                                 "with its interval; dash-dot: this run's retrievers at their measured set precision "
                                 "(measured); triangles: the paper's retrievers (reference)",
               title_fontsize=7)
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
    """Left: resolve rate per retriever, recorded (measured, no hint) and the FIT without/with its files.
    Right: the paired change with/without (FIT, 95% cluster bootstrap over the same runs), beside the paper's
    change as a reference (another agent and baseline: its level is not drawn against these runs)."""
    fig, (ax, ax2) = plots.subplots(1, 2, width=12, height=3.6)
    table = table[table["n"] > 0].reset_index(drop=True)
    if not len(table):
        for a in (ax, ax2):
            plots.undefined(a, "resolve rate per retriever", "no retriever output on an instance with a recorded run")
        return fig
    x = np.arange(len(table))
    ticks = [f"{r}\n(n={n})" for r, n in zip(table["retriever"], table["n"])]
    ax.bar(x - 0.27, 100 * table["resolve_recorded"], 0.27, label="recorded verdicts (measured, no hint)",
           color="white", edgecolor="0.3", hatch="///")
    for off, col, lab, colour in ((0.0, "resolve_model_without", "FIT without hint", plots.PALETTE[5]),
                                  (0.27, "resolve_model_with", "FIT with the retriever's files", plots.PALETTE[1])):
        v = 100 * table[col]
        ax.bar(x + off, v, 0.27, color=colour, label=lab)
    ax.set_xticks(x, ticks)
    ax.set_ylabel("resolve rate (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3)
    plots.title(ax, "Resolve rate: recorded and modelled (levels)", "real SWE-bench Verified runs, FIT",
                int(table["n"].max()))
    d = 100 * table["resolve_change_observational"]
    err = [d - 100 * table["resolve_change_observational_lo"], 100 * table["resolve_change_observational_hi"] - d]
    ax2.errorbar(x, d, yerr=err, fmt="o", capsize=4, color=plots.PALETTE[1],
                 label="FIT with - without, paired over the same runs, 95% cluster-bootstrap CI")
    ref = 100 * (paper["downstream.resolve_with"] - paper["downstream.resolve_without"])
    ax2.axhline(ref, color="0.4", ls=":", label=f"paper CodeGrep {ref:+.1f} points (reference: OpenHands, 500 "
                                                f"instances, {100 * paper['downstream.resolve_without']:.1f}% baseline)")
    ax2.axhline(0, color="0.3", lw=0.8)
    ax2.set_xticks(x, ticks)
    ax2.set_ylabel("resolve change (percentage points)")
    ax2.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    plots.title(ax2, "Resolve change with each retriever's files (paired)", "real runs, FIT", int(table["n"].max()))
    fig.suptitle("Resolve FIT: logistic regression on W, H and instance covariates over the real recorded runs",
                 fontsize=9)
    return fig

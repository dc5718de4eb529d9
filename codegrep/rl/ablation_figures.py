"""Notebook 04's figures, drawn from ``codegrep.rl.ablation``'s frames in the bundle's style (``codegrep.plots``)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from codegrep import plots
from codegrep.rl.ablation import PAPER_KL_RATIO
from codegrep.rl.paired import EQUIVALENCE

ARM_ORDER = ("none", "reward", "advantage", "gated", "normalize_then_sum")


def _arm_label(layer: str, lam: float) -> str:
    return layer if lam is None or (isinstance(lam, float) and math.isnan(lam)) else f"{layer} (λ={lam:g})"


def _arms(df: pd.DataFrame) -> list[tuple[str, Any]]:
    keys = df[["layer", "lam"]].drop_duplicates().itertuples(index=False, name=None)
    return sorted(keys, key=lambda k: (ARM_ORDER.index(k[0]) if k[0] in ARM_ORDER else 99,
                                       -1 if pd.isna(k[1]) else k[1]))


def mechanism_figure(mech: pd.DataFrame, similarity: pd.DataFrame, lam: float) -> Any:
    """(a) mean |correctness| and |efficiency| part of each layer's advantage on tied and on varied
    recorded groups; (b) per recorded training batch, the cosine between the advantage and reward
    layers' advantage vectors against the batch's share of tied groups."""
    fig, (a, b) = plots.subplots(1, 2, width=10.5, height=3.6)
    n_groups = mech["group"].nunique() if len(mech) else 0
    if not len(mech):
        plots.undefined(a, "Advantage split per layer", "no recorded rollout group had 2+ rollouts")
    else:
        layers = [x for x in ARM_ORDER if x in set(mech["layer"])]
        width = 0.38
        for k, (tied, label) in enumerate([(True, "tied groups"), (False, "groups with reward variance")]):
            sub = mech[mech["tied"] == tied].groupby("layer")[["correctness_abs", "efficiency_abs"]].mean()
            n = int(mech.loc[mech["tied"] == tied, "group"].nunique())
            x = np.arange(len(layers)) + (k - 0.5) * width
            corr = [sub["correctness_abs"].get(layer, np.nan) for layer in layers]
            eff = [sub["efficiency_abs"].get(layer, np.nan) for layer in layers]
            a.bar(x, corr, width, color=plots.PALETTE[0], alpha=1.0 if tied else 0.55,
                  label=f"correctness part, {label} (n={n})", edgecolor="k" if tied else "none")
            a.bar(x, eff, width, bottom=np.nan_to_num(corr), color=plots.PALETTE[1], alpha=1.0 if tied else 0.55,
                  label=f"efficiency part, {label} (n={n})", edgecolor="k" if tied else "none")
        a.set_xticks(np.arange(len(layers)), layers)
        a.set_xlabel("efficiency layer")
        a.set_ylabel("mean |advantage part| per rollout")
        a.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        plots.title(a, f"(a) Exact split of each layer's advantage, λ={lam:g}", "recorded rollout groups (real)",
                    n_groups, "groups")
    if not len(similarity) or similarity["cosine"].isna().all():
        plots.undefined(b, "(b) When the layers coincide",
                        "no recorded training batch (or every batch had zero advantages)")
    else:
        b.scatter(similarity["tied_share"], similarity["cosine"], s=18, color=plots.PALETTE[2],
                  label="one recorded training batch")
        b.axhline(1.0, ls=":", color="0.4", label="cosine 1: proportional advantages → same Adam step")
        b.set_xlim(-0.05, 1.05)
        b.set_xlabel("share of tied groups in the batch")
        b.set_ylabel("cosine(advantage-layer A, reward-layer A)")
        b.legend(fontsize=7, loc="lower left")
        plots.title(b, "(b) Where the arms can differ", "recorded training batches (real)", len(similarity),
                    "batches")
    plots.mark_source(fig, "measured", "exact algebra on recorded rewards and costs, no model")
    return fig


def probe_kl_figure(df: pd.DataFrame, curves: pd.DataFrame, level: float = 0.90) -> Any:
    """(a) exact probe KL per arm over steps (mean over seeds, band = min-max over seeds);
    (b) on-policy k3 estimate, same layout; (c) paired ratio advantage/reward per step with its t band."""
    fig, (a, b, c) = plots.subplots(1, 3, width=14, height=3.6)
    n_seeds = int(df["seed"].nunique())
    for ax, col, what in [(a, "kl_exact", "(a) Exact KL to the initial policy, fixed probe set"),
                          (b, "kl", "(b) On-policy k3 KL estimate (sampled tokens)")]:
        have = df.dropna(subset=[col]) if col in df else df.iloc[0:0]
        if not len(have) or not (have[col] > 0).any():
            plots.undefined(ax, what, f"`{col}` was not logged or is 0 at every step (policy did not move)")
            continue
        for i, (layer, lam) in enumerate(_arms(have)):
            g = have[(have["layer"] == layer) & ((have["lam"] == lam) | (pd.isna(lam) & have["lam"].isna()))]
            st = g.groupby("step")[col].agg(["mean", "min", "max", "count"])
            colour = plots.PALETTE[i % len(plots.PALETTE)]
            ax.plot(st.index, st["mean"], marker="o", ms=3, color=colour, label=_arm_label(layer, lam))
            if st["count"].max() > 1:
                ax.fill_between(st.index, st["min"], st["max"], color=colour, alpha=0.15)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel("KL(policy ‖ initial), nats/token")
        plots.integer_ticks(ax, "x")
        ax.legend(fontsize=7, title=f"line: mean; band: {plots.interval_label('seeds', n=n_seeds)}",
                  title_fontsize=7)
        plots.title(ax, what, "real runs", n_seeds, "seeds per arm")
    if not len(curves) or curves["log_ratio"].isna().all():
        plots.undefined(c, "(c) Paired KL ratio advantage/reward", "needs positive exact KL in both arms for a seed")
    else:
        for i, (lam, g) in enumerate(curves.groupby("lam")):
            colour = plots.PALETTE[(i + 2) % len(plots.PALETTE)]
            c.plot(g["step"], np.exp(g["log_ratio"]), marker="o", ms=3, color=colour,
                   label=f"λ={lam:g}: geometric mean over seeds")
            ok = g["lo"].notna()
            if ok.any():
                c.fill_between(g.loc[ok, "step"], np.exp(g.loc[ok, "lo"]), np.exp(g.loc[ok, "hi"]), color=colour,
                               alpha=0.2, label=f"{plots.interval_label('t', level)} over paired seeds")
        c.axhspan(*EQUIVALENCE, color="0.85", alpha=0.5, label=f"'no difference' band {EQUIVALENCE}")
        c.axhline(1.0, color="0.3", lw=0.8)
        c.axhline(PAPER_KL_RATIO, ls="--", color="0.4", label='paper: "about a third" (reference)')
        values = np.exp(pd.concat([curves["log_ratio"], curves["lo"], curves["hi"]]).dropna())
        ratio_axis(c, values)
        c.set_xlabel("GRPO step")
        c.set_ylabel("exact probe KL, advantage / reward")
        plots.integer_ticks(c, "x")
        c.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)  # below: never over 1/3
        plots.title(c, "(c) Paired ratio per step", "real runs", int(curves["n_seeds"].max()), "paired seeds")
    return fig


RATIO_TICKS = (0.05, 0.1, 0.2, 1 / 3, 0.5, 0.67, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)


def ratio_ticks(lo: float, hi: float) -> list[float]:
    """Readable ticks for a log ratio axis spanning [lo, hi] (always 1/3 and 1 when inside).

    >>> [round(t, 2) for t in ratio_ticks(0.25, 1.6)]
    [0.33, 0.5, 0.67, 1.0, 1.5]
    """
    return [t for t in RATIO_TICKS if lo <= t <= hi]


def ratio_axis(ax: Any, values: Any) -> None:
    """Log y axis for a KL ratio: limits cover the data, the paper's 1/3 and 1, ticks labelled at readable ratios."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    v = [float(x) for x in np.ravel(values) if np.isfinite(x) and x > 0] + [PAPER_KL_RATIO, 1.0, *EQUIVALENCE]
    lo, hi = min(v) / 1.3, max(v) * 1.3
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.yaxis.set_major_locator(FixedLocator(ratio_ticks(lo, hi)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda t, _: "1/3" if abs(t - 1 / 3) < 1e-9 else f"{t:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


DIAGNOSTICS = (("tied_group_share", "share of tied groups"), ("advantage_efficiency_abs", "mean |efficiency part of A|"),
               ("advantage_correctness_abs", "mean |correctness part of A|"), ("update_norm", "‖Δθ‖ per step"),
               ("entropy", "policy entropy, nats/token"), ("rounds", "rounds per episode"),
               ("tokens", "generated tokens per episode"), ("task_reward", "task reward (F0.5 + 0.2·format)"))


MARKERS = ("o", "s", "^", "D", "v")


def diagnostics_figure(df: pd.DataFrame) -> Any:
    """Per step and arm: mean over seeds (line) and min-max over seeds (error bar); arms are drawn side by side
    (a small x offset, own marker and line style), because paired arms coincide until their first mixed batch."""
    fig, axes = plots.subplots(2, 4, width=15, height=3.1)
    n_seeds = int(df["seed"].nunique())
    arms_ = _arms(df)
    for ax, (col, label) in zip(axes.ravel(), DIAGNOSTICS):
        if col not in df or df[col].isna().all():
            plots.undefined(ax, label, f"`{col}` was not logged by these runs")
            continue
        for i, (layer, lam) in enumerate(arms_):
            g = df[(df["layer"] == layer) & ((df["lam"] == lam) | (pd.isna(lam) & df["lam"].isna()))]
            st = g.groupby("step")[col].agg(["mean", "min", "max"])
            dx = (i - (len(arms_) - 1) / 2) * 0.12
            colour = plots.PALETTE[i % len(plots.PALETTE)]
            ax.errorbar(st.index + dx, st["mean"], yerr=[(st["mean"] - st["min"]).clip(lower=0), (st["max"] - st["mean"]).clip(lower=0)],
                        marker=MARKERS[i % len(MARKERS)], ms=3.5, lw=1.2, capsize=2, color=colour,
                        ls="-" if i % 2 == 0 else "--", label=_arm_label(layer, lam))
        ax.set_xlabel("GRPO step (arms offset sideways)")
        ax.set_ylabel(label)
        plots.integer_ticks(ax, "both" if col == "rounds" else "x")  # a steady 2 rounds reads "2", not 1.900..2.100
        ax.set_title(label, fontsize=8)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=len(arms_) + 1,
               title=f"marker: mean over {n_seeds} seeds; bar: {plots.interval_label('seeds', n=n_seeds)}",
               title_fontsize=7, bbox_to_anchor=(0.5, -0.06))
    fig.suptitle(f"Per-step measurements per arm: real runs, {n_seeds} seeds ({df['run'].nunique()} runs); "
                 "paired arms coincide until a batch mixes tied and varied groups", fontsize=10)
    return fig


def study_figure(doc: dict[str, Any]) -> Any:
    """The committed study (``ablation_study.json``): (a) per-seed paired ratio advantage/reward with the 90%
    t-interval of the geometric mean against the paper's 1/3 and 1; (b) share of tied groups per step and seed."""
    fig, (a, b) = plots.subplots(1, 2, width=12, height=3.8)
    seeds = doc.get("seeds") or []
    model = doc.get("model", {}).get("kind", "?")
    ratios = [(r["seed"], r["kl_ratio"], r["informative"]) for r in seeds]
    ok = [(s, x, inf) for s, x, inf in ratios if x is not None and x > 0]
    if not ok:
        plots.undefined(a, "(a) Paired KL ratio per seed", "no seed with positive probe KL in both arms")
    else:
        xs = np.arange(len(ok))
        for k, (s, x, inf) in enumerate(ok):
            a.scatter([k], [x], color=plots.PALETTE[0] if inf else "0.6", marker="o" if inf else "x", s=22,
                      label=("informative seed" if inf else "uninformative seed (no mixed batch)")
                      if k == next(i for i, o in enumerate(ok) if o[2] == inf) else None)
        gm, lo, hi = doc.get("kl_ratio_geomean"), doc.get("kl_ratio_lo"), doc.get("kl_ratio_hi")
        if gm is not None and lo is not None and hi is not None:
            a.axhspan(lo, hi, color=plots.PALETTE[0], alpha=0.15,
                      label=f"{plots.interval_label('t', doc.get('interval_level', 0.9))}, geometric mean "
                            f"{gm:.2f} (n={doc['n_paired_seeds']})")
            a.axhline(gm, color=plots.PALETTE[0], lw=1)
        a.axhline(1.0, color="0.3", lw=0.8, label="1: no difference")
        a.axhline(PAPER_KL_RATIO, ls="--", color="0.4", label='paper: "about a third" (reference)')
        ratio_axis(a, [x for _, x, _ in ok] + [v for v in (lo, hi) if v is not None])
        a.set_xticks(xs, [str(s) for s, _, _ in ok])
        a.set_xlabel("seed")
        a.set_ylabel("final exact probe KL, advantage / reward")
        a.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        plots.title(a, "(a) Paired ratio per seed (mechanism study)", f"real runs, {model.split(',')[0]}",
                    len(ok), "seeds")
    shares = [(r["seed"], r["tied_group_share"].get("reward") or []) for r in seeds]
    if not any(s for _, s in shares):
        plots.undefined(b, "(b) Share of tied groups per step", "no step was logged")
    else:
        for k, (seed, s) in enumerate(shares):
            steps = np.arange(1, len(s) + 1)
            b.plot(steps + (k - len(shares) / 2) * 0.02, s, marker="o", ms=2.5, lw=0.8, alpha=0.7,
                   color=plots.PALETTE[k % len(plots.PALETTE)])
        b.axhspan(0, 1, color="0.95", zorder=-1)
        b.set_ylim(-0.05, 1.05)
        b.set_xlabel("GRPO step (reward arm; the advantage arm's first step is the same batch)")
        b.set_ylabel("share of tied groups in the batch\n(all tied: the layers take the same step)", fontsize=8)
        plots.integer_ticks(b, "x")
        b.axhline(1.0, ls=":", color="0.4", lw=0.8)
        b.axhline(0.0, ls=":", color="0.4", lw=0.8)
        b.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0\nall varied", "0.25", "0.5\nmixed", "0.75", "1\nall tied"])
        b.set_xlim(0.5, max(len(s) for _, s in shares) + 0.5)
        plots.title(b, "(b) Tied groups per step, one line per seed", "real runs", len(shares), "seeds")
    plots.mark_source(fig, "measured", f"{model}; committed result {doc.get('commit', '?')[:10]}")
    return fig


def time_figure(breakdown: dict[str, float]) -> Any:
    """Share of a GRPO step's wall time per phase (measured over every ablation step)."""
    fig, ax = plots.subplots(1, 1, width=6.5, height=2.6)
    parts = {k[len("share_"):]: v for k, v in breakdown.items() if k.startswith("share_") and v == v}
    if not parts:
        plots.undefined(ax, "Where a GRPO step's time goes", "no timing columns were logged")
        return fig
    left = 0.0
    for i, (name, share) in enumerate(parts.items()):
        ax.barh([0], [share], left=left, color=plots.PALETTE[i % len(plots.PALETTE)], label=f"{name} {share:.0%}")
        left += share
    ax.set_yticks([])
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"share of step wall time (mean step {breakdown['seconds_per_step']:.1f} s)")
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.45))
    plots.title(ax, "Where a GRPO step's time goes", "measured on this machine", int(breakdown["steps"]), "steps")
    return fig

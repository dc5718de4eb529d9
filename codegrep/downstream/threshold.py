"""The precision threshold as a bracket: replay MODEL (lower bound) and observational FIT (upper bound).

A hint of ``set_size`` k files at slot precision p: each slot holds a target file with probability p, so
the hits are Binomial(k, p), capped at the instance's number of gold files (a retriever cannot return more
correct files than exist); the other slots hold realistic distractors (files the run opened that were not
gold, paths its observations showed, then such files of the same repository's other runs). Every run is
replayed once per hit count h = 0..k (``draws`` distractor draws each) and the expectation at p weights the
hit counts by their binomial probabilities, so the curve is exact in p and smooth.

* **replay** (``codegrep.downstream.replay``): a hit removes the search before the first target view, a
  wrong file costs its read; resolution keeps the recorded verdict. Derailment is left out, so its
  crossing point is a *lower* bound.
* **observational** (``codegrep.downstream.observational``): the replay plus what the real runs say a
  changed window does to the rest of the run. The hint changes ``W`` (wrong files opened before the first
  target: the hint's unread wrong files with a hit; the run's own wandering plus them without) and ``H``
  (the first file opened is a target: with a hit and no wrong file read first); the fitted effects of
  ``ΔW``/``ΔH`` move rounds after the window (additively), tokens after the window (multiplicatively, on
  log tokens) and the log-odds of resolving. Resolve is **modelled**: the base rate is each run's fitted
  probability, the hinted rate that probability shifted by the fitted effects; it is never the recorded
  verdict copied. Confused runs both wander and fail, so these effects are biased upward and the crossing
  point is an *upper* bound.

The crossing point p* is where the expected change turns favourable (cost change falls through zero,
resolve change rises through zero); intervals come from a cluster bootstrap over instances that refits the
observational effects in every replicate.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Sequence

import numpy as np
import pandas as pd

from codegrep.downstream.observational import Effects, cluster_weights, fit_effects, run_features
from codegrep.downstream.replay import ReplayParams, Trace, replay

METRICS = ("tokens", "rounds", "resolve")
"""Curves: relative change of summed tokens and rounds, absolute change of the resolve rate."""
MODELS = ("replay", "observational")


@dataclass
class ThresholdConfig:
    """``downstream.threshold`` of a profile (notebook 05)."""

    set_size: int = 3
    """k: files in the hint (the curve's set size; retrievers are placed at their precision at this size)."""
    grid: int = 21
    """Points of the precision grid on [0, 1] where the curves are evaluated."""
    draws: int = 3
    """Distractor draws per (run, hit count)."""
    n_boot: int = 500
    """Cluster-bootstrap replicates over instances (the observational effects are refitted in each)."""
    window_cap: int = 10
    """K: the localisation window ends at the first target view, or after K steps."""
    min_repo_runs: int = 5
    """Repositories with fewer runs share one ``other`` fixed effect."""
    l2: float = 1.0
    """L2 penalty of the resolve logistic regression (intercept unpenalised)."""
    alpha: float = 0.05
    """1 - coverage of the intervals."""
    seed: int = 0
    """Seed of the distractor draws and the bootstrap."""

    @classmethod
    def from_section(cls, values: dict[str, Any] | None, seed: int = 0) -> "ThresholdConfig":
        """Profile values over the defaults; an unknown key is an error naming it."""
        from codegrep.config import check_keys

        values = dict(values or {})
        check_keys(values, [f.name for f in fields(cls)], "downstream.threshold")
        values.setdefault("seed", seed)
        return cls(**{k: type(getattr(cls, k))(v) for k, v in values.items() if v is not None})


def distractor_pools(traces: Sequence[Trace], cap: int = 200) -> dict[str, list[str]]:
    """instance_id -> its own distractors, then those of same-repository runs (minus its gold), at most ``cap``."""
    by_repo: dict[str, dict[str, None]] = {}
    for t in traces:
        pool = by_repo.setdefault(t.repo, {})
        for p in t.distractors():
            if len(pool) >= 4 * cap:
                break
            pool.setdefault(p, None)
    out = {}
    for t in traces:
        bad = set(t.gold) | set(t.created)
        own = [p for p in dict.fromkeys(t.distractors() + list(by_repo[t.repo])) if p not in bad]
        out[t.instance_id] = own[:cap]
    return out


def _pick(rng: np.random.Generator, items: Sequence[str], n: int) -> list[str]:
    n = min(int(n), len(items))
    return [items[i] for i in rng.choice(len(items), size=n, replace=False)] if n > 0 else []


def synthetic_candidates(trace: Trace, hits: int, set_size: int, pool: Sequence[str],
                         rng: np.random.Generator) -> list[str]:
    """A hint with ``hits`` correct slots (capped at the gold count) and ``set_size - hits`` distractors.

    >>> t = Trace("i", "o/r", True, ["a.py"], [])
    >>> synthetic_candidates(t, 3, 3, ["x.py", "y.py"], np.random.default_rng(0))
    ['a.py']
    >>> sorted(synthetic_candidates(t, 0, 2, ["x.py", "y.py"], np.random.default_rng(0)))
    ['x.py', 'y.py']
    """
    files = _pick(rng, trace.gold, hits) + _pick(rng, pool, set_size - hits)
    return [files[i] for i in rng.permutation(len(files))]


def hinted_run(trace: Trace, feat: dict[str, Any], cand: Sequence[str], params: ReplayParams,
               rng: np.random.Generator) -> dict[str, Any]:
    """The replayed run with ``cand`` and its change of window features (ΔW, ΔH) for the observational fit."""
    r = replay(trace, cand, params, rng)
    reads = int(r.extra["reads_added"])
    if r.extra["n_hits"]:
        w, h = reads, int(reads == 0)
    else:
        w, h = feat["W"] + reads, feat["H"] if reads == 0 else 0
    return {"instance_id": trace.instance_id, "rounds": r.rounds, "tokens": r.tokens, "resolved": int(bool(r.resolved)),
            "dW": w - feat["W"], "dH": h - feat["H"], "precision": r.extra["precision"], "recall": r.extra["recall"],
            "n_hits": r.extra["n_hits"], "n_candidates": len(r.candidate_files or [])}


def hint_grid(traces: Sequence[Trace], feats: pd.DataFrame, params: ReplayParams, set_size: int, draws: int,
              seed: int = 0) -> pd.DataFrame:
    """One row per (run, slot hits h = 0..k, draw): the replayed run and its ΔW, ΔH (a MODEL)."""
    rng, pools = np.random.default_rng(seed), distractor_pools(traces)
    frows = feats.to_dict("records")
    rows = []
    for i, t in enumerate(traces):
        for h in range(set_size + 1):
            for d in range(draws):
                cand = synthetic_candidates(t, h, set_size, pools[t.instance_id], rng)
                rows.append({"run": i, "h": h, "draw": d, **hinted_run(t, frows[i], cand, params, rng)})
    return pd.DataFrame(rows)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(x, -30, 30)))


def observational_outcomes(rows: pd.DataFrame, feats: pd.DataFrame, eff: Effects) -> dict[str, np.ndarray]:
    """Per hinted row (``run`` indexes ``feats``): rounds, tokens and resolve probability under the FIT, and
    each run's fitted resolve probability without a hint (``base_resolve``, per run)."""
    run = rows["run"].to_numpy(int)
    dw, dh = rows["dW"].to_numpy(float), rows["dH"].to_numpy(float)
    e = lambda o, c: eff.effect(o, c)  # noqa: E731
    eta = eff.linear_predictor(feats, "resolved")
    after = feats["tokens_after"].to_numpy(float)[run]
    return {"rounds": np.maximum(rows["rounds"].to_numpy(float) + e("rounds_after", "W") * dw
                                 + e("rounds_after", "H") * dh, 1.0),
            "tokens": rows["tokens"].to_numpy(float)
            + after * np.expm1(e("log_tokens_after", "W") * dw + e("log_tokens_after", "H") * dh),
            "resolve": _sigmoid(eta[run] + e("resolved", "W") * dw + e("resolved", "H") * dh),
            "base_resolve": _sigmoid(eta)}


def binomial_weights(p_grid: Sequence[float], set_size: int) -> np.ndarray:
    """(len(p_grid), k+1): P(h slot hits) for Binomial(k, p).

    >>> binomial_weights([0.5], 2).round(2).tolist()
    [[0.25, 0.5, 0.25]]
    """
    from scipy.stats import binom

    return binom.pmf(np.arange(set_size + 1)[None, :], set_size, np.asarray(p_grid, float)[:, None])


class _Grid:
    """The hint grid as arrays, averaged over draws: (runs, k+1) matrices for fast bootstrap curves."""

    def __init__(self, rows: pd.DataFrame, feats: pd.DataFrame, set_size: int):
        self.rows, self.feats, self.k = rows, feats, set_size
        self.n = len(feats)
        self.cell = rows["run"].to_numpy(int) * (set_size + 1) + rows["h"].to_numpy(int)
        self.count = np.bincount(self.cell, minlength=self.n * (set_size + 1))
        self.base = {"tokens": feats["tokens"].to_numpy(float), "rounds": feats["rounds"].to_numpy(float),
                     "resolve": feats["resolved"].to_numpy(float)}
        self.replay = {m: self.mean(rows[c].to_numpy(float))
                       for m, c in (("tokens", "tokens"), ("rounds", "rounds"), ("resolve", "resolved"))}

    def mean(self, values: np.ndarray) -> np.ndarray:
        s = np.bincount(self.cell, weights=values, minlength=self.n * (self.k + 1))
        return (s / np.maximum(self.count, 1)).reshape(self.n, self.k + 1)

    def curves(self, eff: Effects, pmf: np.ndarray, w: np.ndarray) -> dict[tuple[str, str], np.ndarray]:
        obs = observational_outcomes(self.rows, self.feats, eff)
        out = {}
        for metric in METRICS:
            for model in MODELS:
                m = self.replay[metric] if model == "replay" else self.mean(obs[metric])
                expected = w @ (m @ pmf.T)  # (n_p,)
                if metric == "resolve":
                    base = w @ (self.base["resolve"] if model == "replay" else obs["base_resolve"])
                    change = (expected - base) / w.sum()
                else:
                    change = expected / (w @ self.base[metric]) - 1
                out[(model, metric)] = np.where(np.abs(change) < 1e-12, 0.0, change)  # rounding noise is no change
        return out


def crossing_point(x: Sequence[float], y: Sequence[float]) -> float:
    """Smallest x where y falls from above zero to zero or below, by linear interpolation (NaN: never).

    >>> crossing_point([0.0, 0.5, 1.0], [0.4, 0.2, -0.2])
    0.75
    >>> import math; math.isnan(crossing_point([0.0, 1.0], [0.3, 0.1]))
    True
    """
    order = np.argsort(x)
    xs, ys = np.asarray(x, float)[order], np.asarray(y, float)[order]
    for i in range(1, len(xs)):
        if ys[i - 1] > 0 >= ys[i]:
            return float(xs[i - 1] + (xs[i] - xs[i - 1]) * ys[i - 1] / (ys[i - 1] - ys[i]))
    return float("nan")


def threshold_of(p_grid: Sequence[float], change: Sequence[float], metric: str) -> float:
    """p* of one curve: cost change falls through zero; resolve change rises through zero."""
    y = np.asarray(change, float)
    return crossing_point(p_grid, -y if metric == "resolve" else y)


@dataclass
class Bracket:
    """Curves, thresholds and their intervals (replay: MODEL; observational: FIT)."""

    curves: pd.DataFrame
    """p, model, metric, change (point estimate), low, high (pointwise cluster-bootstrap band)."""
    thresholds: pd.DataFrame
    """model, metric, threshold, low, high, found_share (share of replicates with a crossing)."""
    effects: Effects
    """Point fit of the observational effects."""
    boot_effects: list[Effects]
    """The refitted effects of every bootstrap replicate."""
    feats: pd.DataFrame
    """Run features (window, W, H, outcomes, covariates)."""
    config: ThresholdConfig

    def threshold(self, model: str, metric: str = "tokens") -> dict[str, float]:
        row = self.thresholds[(self.thresholds.model == model) & (self.thresholds.metric == metric)].iloc[0]
        return {"threshold": float(row.threshold), "low": float(row.low), "high": float(row.high),
                "found_share": float(row.found_share)}

    def value_at(self, p: float, model: str, metric: str) -> float:
        c = self.curves[(self.curves.model == model) & (self.curves.metric == metric)]
        return float(np.interp(p, c["p"], c["change"]))


def bracket(traces: Sequence[Trace], params: ReplayParams, cfg: ThresholdConfig) -> Bracket:
    """Both curves over the precision grid with bands, and both thresholds with cluster-bootstrap intervals."""
    feats = run_features(traces, cfg.window_cap)
    rows = hint_grid(traces, feats, params, cfg.set_size, cfg.draws, cfg.seed)
    grid, p = _Grid(rows, feats, cfg.set_size), np.linspace(0, 1, cfg.grid)
    pmf = binomial_weights(p, cfg.set_size)
    point_eff = fit_effects(feats, l2=cfg.l2, min_repo_runs=cfg.min_repo_runs)
    point = grid.curves(point_eff, pmf, np.ones(len(feats)))
    weights = cluster_weights(feats["instance_id"], cfg.n_boot, cfg.seed)
    boot_eff, boot_curves = [], {key: [] for key in point}
    for w in weights:
        eff = fit_effects(feats, w, repos=point_eff.repos, l2=cfg.l2)
        boot_eff.append(eff)
        for key, v in grid.curves(eff, pmf, w).items():
            boot_curves[key].append(v)
    a = cfg.alpha
    curve_rows, th_rows = [], []
    for (model, metric), v in point.items():
        b = np.asarray(boot_curves[(model, metric)])
        lo, hi = (np.quantile(b, [a / 2, 1 - a / 2], axis=0) if len(b) else (v * np.nan, v * np.nan))
        curve_rows += [{"p": float(x), "model": model, "metric": metric, "change": float(y), "low": float(l),
                        "high": float(h), "source": "model" if model == "replay" else "fit"}
                       for x, y, l, h in zip(p, v, lo, hi)]
        boots = np.array([threshold_of(p, y, metric) for y in b])
        found = boots[~np.isnan(boots)]
        tlo, thi = np.quantile(found, [a / 2, 1 - a / 2]) if found.size else (np.nan, np.nan)
        th_rows.append({"model": model, "metric": metric, "threshold": threshold_of(p, v, metric),
                        "low": float(tlo), "high": float(thi), "found_share": float(found.size / max(len(b), 1)),
                        "source": "model" if model == "replay" else "fit"})
    return Bracket(pd.DataFrame(curve_rows), pd.DataFrame(th_rows), point_eff, boot_eff, feats, cfg)


def _ratio(num: np.ndarray, den: np.ndarray, idx: np.ndarray | None = None) -> float:
    idx = np.arange(len(num)) if idx is None else idx
    d = den[idx].sum()
    return float(num[idx].sum() / d - 1) if d else float("nan")


def retriever_outcomes(traces: Sequence[Trace], feats: pd.DataFrame, params: ReplayParams,
                       candidates: dict[str, list[str]], seed: int = 0) -> pd.DataFrame:
    """Per run whose instance has the retriever's output: the replayed run with exactly those files."""
    rng, frows = np.random.default_rng(seed), feats.to_dict("records")
    rows = [{"run": i, "h": 0, "draw": 0, **hinted_run(t, frows[i], candidates[t.instance_id], params, rng)}
            for i, t in enumerate(traces) if t.instance_id in candidates]
    return pd.DataFrame(rows)


def retriever_summary(rows: pd.DataFrame, br: Bracket, n_boot: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Replay (MODEL) and observational (FIT) changes for one retriever's real output on its instances, with
    cluster-bootstrap intervals (instances resampled, the refitted effects of replicate b used with it)."""
    feats, n = br.feats, len(rows)
    if n == 0:
        return {"n": 0, "precision": float("nan")}
    run = rows["run"].to_numpy(int)
    sub = feats.iloc[run]
    obs = observational_outcomes(rows, feats, br.effects)
    resolved = sub["resolved"].to_numpy(float)

    def numbers(eff: Effects, idx: np.ndarray) -> dict[str, float]:
        o = obs if eff is br.effects else observational_outcomes(rows, feats, eff)
        rr = np.flatnonzero(resolved[idx] > 0)
        ridx = idx[rr]
        return {"rounds_change": _ratio(rows["rounds"].to_numpy(float), sub["rounds"].to_numpy(float), idx),
                "tokens_change": _ratio(rows["tokens"].to_numpy(float), sub["tokens"].to_numpy(float), idx),
                "tokens_resolved_change": _ratio(rows["tokens"].to_numpy(float), sub["tokens"].to_numpy(float), ridx),
                "rounds_change_observational": _ratio(o["rounds"], sub["rounds"].to_numpy(float), idx),
                "tokens_change_observational": _ratio(o["tokens"], sub["tokens"].to_numpy(float), idx),
                "tokens_resolved_change_observational": _ratio(o["tokens"], sub["tokens"].to_numpy(float), ridx),
                "resolve_model_without": float(o["base_resolve"][run][idx].mean()),
                "resolve_model_with": float(o["resolve"][idx].mean()),
                "resolve_change_observational": float(o["resolve"][idx].mean() - o["base_resolve"][run][idx].mean()),
                "precision": float(rows["precision"].to_numpy(float)[idx].mean())}

    point = numbers(br.effects, np.arange(n))
    rng = np.random.default_rng(seed)
    boots = br.boot_effects[: n_boot] if n_boot else br.boot_effects
    draws = [numbers(eff, rng.integers(0, n, n)) for eff in boots]
    out: dict[str, Any] = {"n": n, "resolve_recorded": float(resolved.mean()),
                           "recall": float(rows["recall"].mean()), "mean_files": float(rows["n_candidates"].mean())}
    a = br.config.alpha
    for k, v in point.items():
        d = np.array([x[k] for x in draws], float)
        d = d[~np.isnan(d)]
        lo, hi = np.quantile(d, [a / 2, 1 - a / 2]) if d.size else (np.nan, np.nan)
        out |= {k: v, f"{k}_lo": float(lo), f"{k}_hi": float(hi)}
    return out


def bracket_verdict(precision: float, replay_p: float, observational_p: float) -> str:
    """Where a precision sits against the bracket [replay p*, observational p*].

    >>> bracket_verdict(0.8, 0.2, 0.6)
    'above both thresholds: expected to pay under both'
    >>> bracket_verdict(0.4, 0.2, 0.6)
    'inside the bracket: expected to pay only if wrong files do not derail the agent'
    >>> bracket_verdict(0.1, 0.2, 0.6)
    'below both thresholds: expected to cost under both'
    """
    if np.isnan(precision):
        return "not measured"
    lo = replay_p if not np.isnan(replay_p) else 0.0
    hi = observational_p if not np.isnan(observational_p) else 1.0
    if precision > hi:
        return "above both thresholds: expected to pay under both"
    if precision > lo:
        return "inside the bracket: expected to pay only if wrong files do not derail the agent"
    return "below both thresholds: expected to cost under both"

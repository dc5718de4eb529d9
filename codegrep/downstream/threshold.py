"""The precision threshold under the replay cost model (every number here is a MODEL estimate).

Synthetic retrievers: a candidate set of ``set_size`` slots, each slot correct with probability
``p``; correct slots take gold files (at most as many as exist: a retriever cannot return more
correct files than there are), wrong slots take realistic distractors (files the agent viewed that
were not gold, paths its observations showed, then such files of the same repository's other
rollouts). The x axis is the realised macro precision. The crossing point is where the modelled
token change (ratio of summed tokens, hinted / recorded - 1) falls to zero; its interval comes from
resampling instances.

Real retrievers are evaluated on other instances than the mined rollouts; their effect is
*transferred*: each mined instance gets a candidate set drawn from a random row of the retriever's
results (the row's recall applied to this instance's gold files, its count of wrong files taken as
distractors). Where a results file names a mined instance itself, its files are used directly.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np
import pandas as pd

from codegrep.downstream.replay import ReplayParams, Trace, replay


def distractor_pools(traces: Sequence[Trace]) -> dict[str, list[str]]:
    """instance_id -> its own distractors, then those of same-repository rollouts (minus its gold)."""
    by_repo: dict[str, list[str]] = defaultdict(list)
    for t in traces:
        by_repo[t.repo] += t.distractors()
    out = {}
    for t in traces:
        bad = set(t.gold) | set(t.created)
        out[t.instance_id] = [p for p in dict.fromkeys(t.distractors() + by_repo[t.repo]) if p not in bad]
    return out


def _pick(rng: np.random.Generator, items: Sequence[str], n: int) -> list[str]:
    n = min(int(n), len(items))
    return [items[i] for i in rng.choice(len(items), size=n, replace=False)] if n > 0 else []


def synthetic_candidates(trace: Trace, precision: float, set_size: int, pool: Sequence[str],
                         rng: np.random.Generator) -> list[str]:
    """A candidate set whose slots are each correct with probability ``precision``.

    >>> t = Trace("i", "o/r", True, ["a.py"], [])
    >>> synthetic_candidates(t, 1.0, 3, ["x.py", "y.py"], np.random.default_rng(0))
    ['a.py']
    >>> sorted(synthetic_candidates(t, 0.0, 2, ["x.py", "y.py"], np.random.default_rng(0)))
    ['x.py', 'y.py']
    """
    correct = int((rng.random(set_size) < precision).sum())
    files = _pick(rng, trace.gold, correct) + _pick(rng, pool, set_size - correct)
    return [files[i] for i in rng.permutation(len(files))]


def transferred_candidates(trace: Trace, row: dict[str, Any], pool: Sequence[str],
                           rng: np.random.Generator) -> list[str]:
    """A candidate set for ``trace`` with the recall and wrong-file count of a retriever's result row."""
    n_pred = int(row.get("n_pred") or len(row.get("files") or []))
    n_wrong = n_pred - int(round(float(row.get("precision") or 0.0) * n_pred))
    want = float(row.get("recall") or 0.0) * len(trace.gold)
    n_hit = int(np.floor(want) + (rng.random() < want - np.floor(want)))  # stochastic rounding
    files = _pick(rng, trace.gold, n_hit) + _pick(rng, pool, n_wrong)
    return [files[i] for i in rng.permutation(len(files))]


def _row(trace: Trace, cand: list[str] | None, params: ReplayParams, rng: np.random.Generator,
         **keys: Any) -> dict[str, Any]:
    base, hinted = replay(trace, None, params), replay(trace, cand, params, rng)
    return {**keys, "instance_id": trace.instance_id, "repo": trace.repo, "resolved_base": base.resolved,
            "resolved": hinted.resolved, "rounds_base": base.rounds, "rounds": hinted.rounds,
            "tokens_base": base.tokens, "tokens": hinted.tokens, "precision": hinted.extra["precision"],
            "recall": hinted.extra["recall"], "n_candidates": len(cand or [])}


def precision_sweep(traces: Sequence[Trace], params: ReplayParams, precisions: Sequence[float],
                    set_size: int = 3, draws: int = 20, seed: int = 0) -> pd.DataFrame:
    """One row per (nominal precision, draw, instance): modelled cost with and without the hint."""
    rng, pools = np.random.default_rng(seed), distractor_pools(traces)
    rows = [_row(t, synthetic_candidates(t, p, set_size, pools[t.instance_id], rng), params, rng,
                 nominal_precision=float(p), draw=d)
            for p in precisions for d in range(draws) for t in traces]
    return pd.DataFrame(rows)


def transfer_sweep(traces: Sequence[Trace], params: ReplayParams, results: dict[str, pd.DataFrame],
                   draws: int = 20, seed: int = 0) -> pd.DataFrame:
    """Modelled cost per (retriever, draw, instance) with candidate sets transferred from real results."""
    rng, pools, out = np.random.default_rng(seed), distractor_pools(traces), []
    for name, df in results.items():
        rows = df.to_dict("records")
        direct = {r["instance_id"]: list(r.get("files") or []) for r in rows}
        for d in range(draws):
            for t in traces:
                cand = direct.get(t.instance_id)
                if cand is None:
                    cand = transferred_candidates(t, rows[rng.integers(len(rows))], pools[t.instance_id], rng)
                out.append(_row(t, cand, params, rng, retriever=name, draw=d,
                                direct=t.instance_id in direct))
    return pd.DataFrame(out)


def _matrices(df: pd.DataFrame, by: str) -> tuple[list[Any], list[str], dict[str, np.ndarray]]:
    keys, ids = sorted(df[by].unique()), sorted(df["instance_id"].unique())
    agg = df.groupby([by, "instance_id"])[["tokens", "tokens_base", "rounds", "rounds_base", "precision"]].mean()
    mats = {c: agg[c].unstack(by).reindex(index=ids, columns=keys).to_numpy(float) for c in agg.columns}
    return keys, ids, mats


def _curve(keys: list[Any], m: dict[str, np.ndarray], w: np.ndarray, by: str) -> pd.DataFrame:
    ratio = lambda a, b: (w @ m[a]) / (w @ m[b]) - 1  # noqa: E731
    return pd.DataFrame({by: keys, "precision": (w @ m["precision"]) / w.sum(),
                         "tokens_change": ratio("tokens", "tokens_base"), "rounds_change": ratio("rounds", "rounds_base")})


def cost_curve(df: pd.DataFrame, by: str = "nominal_precision", weights: np.ndarray | None = None) -> pd.DataFrame:
    """Per group: realised precision and the modelled change of summed tokens and rounds (fractions)."""
    keys, ids, m = _matrices(df, by)
    return _curve(keys, m, np.ones(len(ids)) if weights is None else np.asarray(weights, float), by)


def crossing_point(x: Sequence[float], y: Sequence[float]) -> float:
    """Smallest x where y (cost change) falls from above zero to zero or below, by linear interpolation.

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


def threshold_estimate(df: pd.DataFrame, metric: str = "tokens_change", n_boot: int = 1000,
                       alpha: float = 0.05, seed: int = 0) -> dict[str, float]:
    """Crossing point of the sweep and its percentile bootstrap interval (instances resampled)."""
    keys, ids, m = _matrices(df, "nominal_precision")
    n = len(ids)
    curve = _curve(keys, m, np.ones(n), "nominal_precision")
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        c = _curve(keys, m, np.bincount(rng.integers(0, n, n), minlength=n).astype(float), "nominal_precision")
        boots.append(crossing_point(c["precision"], c[metric]))
    boots = np.asarray(boots)
    found = boots[~np.isnan(boots)]
    lo, hi = np.quantile(found, [alpha / 2, 1 - alpha / 2]) if found.size else (np.nan, np.nan)
    return {"threshold": crossing_point(curve["precision"], curve[metric]), "low": float(lo), "high": float(hi),
            "boot_found_share": float(found.size / n_boot), "metric": metric, "n_instances": int(n)}

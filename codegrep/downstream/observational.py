"""The observational estimator: what wandering and a good first file go with in REAL runs (a FIT, not a run).

Per recorded mini-swe-agent run (real, with the SWE-bench harness verdict):

* the **localisation window** is the steps before the first view of a target (gold) file, capped at
  ``window_cap`` steps (a run that never views a target within the cap has a window of ``window_cap``);
* ``W`` = distinct non-target repository files opened in the window, ``H`` = 1 when the first file the run
  opened is a target;
* outcomes are measured **after** the window (so run length does not drive both sides): rounds after,
  log(1 + tokens after), resolved; a run that ended inside its window has no after-window outcome and is
  left out of the fit;
* instance covariates: repository (fixed effects; repositories with fewer than ``min_repo_runs`` runs pooled
  into ``other``), number of gold files, log issue length; and an instance effect for every instance with
  several runs (then W and H are also compared between runs of one instance).

``rounds_after`` and ``log_tokens_after`` are fitted by least squares, ``resolved`` by an L2-penalised
logistic regression (the penalty keeps small repositories from separating), all on the same design. The
effects of ``W`` and ``H`` are associations: runs that are confused both wander and fail, so the effect of a
wrong file is biased upward; that is why the threshold it implies is the *upper* end of the bracket
(``codegrep.downstream.threshold``). Intervals come from a cluster bootstrap over instances
(``cluster_weights``): an instance with several runs is resampled as a whole. The shipped data hold one run
per instance, so no instance effect enters there and the covariates stand in for them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from codegrep.downstream.replay import Trace

OUTCOMES = ("rounds_after", "log_tokens_after", "resolved")
"""Fitted outcomes: rounds after the window, log(1 + tokens after the window), resolved (0/1)."""


def window_features(trace: Trace, window_cap: int) -> dict[str, float | str | bool]:
    """The window, ``W``, ``H`` and the after-window outcomes of one run (all measured).

    >>> from codegrep.downstream.replay import Step
    >>> t = Trace("o__r-1", "o/r", True, ["a.py"], [Step(100, 5, 50, ("x.py",), True), Step(150, 5, 30, ("y.py", "x.py")),
    ...           Step(180, 5, 100, ("a.py",)), Step(280, 5, 0, ())], issue_chars=400)
    >>> f = window_features(t, 10)
    >>> f["window"], f["W"], f["H"], f["rounds_after"], f["tokens_after"], f["reached"]
    (2, 2, 0, 2, 470, True)
    >>> window_features(t, 1)["W"], window_features(t, 1)["reached"]
    (1, False)
    """
    first = trace.first_target_step()
    end = min(first if first is not None else len(trace.steps), int(window_cap), len(trace.steps))
    gold = set(trace.gold)
    opened = [p for s in trace.steps[:end] for p in s.viewed]
    first_view = next((p for s in trace.steps for p in s.viewed), None)
    tokens = [s.prompt_tokens + s.completion_tokens for s in trace.steps]
    after = int(sum(tokens[end:]))
    return {"instance_id": trace.instance_id, "repo": trace.repo, "window": end,
            "reached": first is not None and first < int(window_cap),
            "W": len({p for p in opened if p not in gold}), "H": int(first_view in gold),
            "rounds": trace.rounds, "tokens": trace.tokens, "rounds_after": trace.rounds - end,
            "tokens_after": after, "log_tokens_after": float(np.log1p(after)), "resolved": int(trace.resolved),
            "n_gold": len(gold), "log_issue_chars": float(np.log(max(trace.issue_chars or 1, 1)))}


def run_features(traces: Sequence[Trace], window_cap: int) -> pd.DataFrame:
    """One row per run: :func:`window_features`."""
    return pd.DataFrame([window_features(t, window_cap) for t in traces])


def repo_levels(feats: pd.DataFrame, min_repo_runs: int) -> list[str]:
    """Repositories with their own fixed effect (at least ``min_repo_runs`` runs), largest first; the first
    is the reference level, the rest of the repositories are pooled into ``other``."""
    counts = feats["repo"].value_counts()
    return [r for r, n in counts.items() if n >= min_repo_runs]


def instance_levels(feats: pd.DataFrame) -> list[str]:
    """Instances with several runs: each gets its own effect (with one run an instance effect is not identifiable)."""
    counts = feats["instance_id"].value_counts()
    return sorted(str(i) for i, n in counts.items() if n >= 2)


def design(feats: pd.DataFrame, repos: Sequence[str], with_repos: bool = True,
           instances: Sequence[str] = ()) -> tuple[np.ndarray, list[str]]:
    """The design matrix: intercept, W, H, n_gold, log issue length, repository dummies (reference = ``repos[0]``),
    then one dummy per instance in ``instances`` (instances with several runs).

    >>> X, names = design(pd.DataFrame({"W": [1, 2], "H": [0, 1], "n_gold": [1, 1], "log_issue_chars": [5.0, 6.0],
    ...                                 "repo": ["a/a", "b/b"]}), ["a/a", "b/b"])
    >>> names
    ['intercept', 'W', 'H', 'n_gold', 'log_issue_chars', 'repo=b/b', 'repo=other']
    >>> X[:, -2].tolist()
    [0.0, 1.0]
    """
    cols = [np.ones(len(feats)), feats["W"].to_numpy(float), feats["H"].to_numpy(float),
            feats["n_gold"].to_numpy(float), feats["log_issue_chars"].to_numpy(float)]
    names = ["intercept", "W", "H", "n_gold", "log_issue_chars"]
    if with_repos and repos:
        for r in list(repos)[1:]:
            cols.append((feats["repo"] == r).to_numpy(float))
            names.append(f"repo={r}")
        cols.append((~feats["repo"].isin(list(repos))).to_numpy(float))
        names.append("repo=other")
    for iid in instances:
        cols.append((feats["instance_id"] == iid).to_numpy(float))
        names.append(f"instance={iid}")
    return np.column_stack(cols), names


def _ols(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    s = np.sqrt(w)
    return np.linalg.lstsq(X * s[:, None], y * s, rcond=None)[0]


def _logit(X: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float, iters: int = 50) -> np.ndarray:
    """Weighted L2-penalised logistic regression by Newton's method (intercept unpenalised).

    >>> X = np.column_stack([np.ones(200), np.r_[np.zeros(100), np.ones(100)]])
    >>> y = np.r_[np.zeros(80), np.ones(20), np.zeros(20), np.ones(80)]
    >>> np.round(_logit(X, y, np.ones(200), 0.0), 2).tolist()  # log-odds -1.39, then +2.77
    [-1.39, 2.77]
    """
    beta = np.zeros(X.shape[1])
    pen = np.full(X.shape[1], float(l2))
    pen[0] = 0.0
    for _ in range(iters):
        mu = 1 / (1 + np.exp(-np.clip(X @ beta, -30, 30)))
        grad = X.T @ (w * (y - mu)) - pen * beta
        hess = (X * (w * mu * (1 - mu))[:, None]).T @ X + np.diag(pen) + 1e-9 * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-8:
            break
    return beta


@dataclass
class Effects:
    """Fitted coefficients, one vector per outcome over the columns ``names`` (a FIT on real runs)."""

    names: list[str]
    coef: dict[str, np.ndarray]
    repos: list[str]
    instances: list[str]

    def effect(self, outcome: str, column: str) -> float:
        return float(self.coef[outcome][self.names.index(column)])

    def linear_predictor(self, feats: pd.DataFrame, outcome: str) -> np.ndarray:
        X, _ = design(feats, self.repos, instances=self.instances)
        return X @ self.coef[outcome]


def fit_effects(feats: pd.DataFrame, weights: np.ndarray | None = None, repos: Sequence[str] | None = None,
                l2: float = 1.0, min_repo_runs: int = 5) -> Effects:
    """Fit the three outcome models on run features (``weights``: bootstrap counts per run); instances with
    several runs get instance effects, so W and H are then also compared within an instance."""
    repos = list(repos) if repos is not None else repo_levels(feats, min_repo_runs)
    instances = instance_levels(feats)
    X, names = design(feats, repos, instances=instances)
    w = np.ones(len(feats)) if weights is None else np.asarray(weights, float)
    w = w * (feats["rounds_after"].to_numpy() > 0)  # a run that ended inside its window has no outcome after it
    coef = {"rounds_after": _ols(X, feats["rounds_after"].to_numpy(float), w),
            "log_tokens_after": _ols(X, feats["log_tokens_after"].to_numpy(float), w),
            "resolved": _logit(X, feats["resolved"].to_numpy(float), w, l2)}
    return Effects(names, coef, repos, instances)


def cluster_weights(clusters: Sequence[str], n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_runs) bootstrap weights: instances drawn with replacement, each run weighted by its
    instance's count (a cluster bootstrap over instances).

    >>> w = cluster_weights(["a", "a", "b"], 50, 0)
    >>> bool((w[:, 0] == w[:, 1]).all()), sorted(set((w[:, 0] + w[:, 2]).tolist()))  # 2 instances drawn each time
    (True, [2.0])
    """
    codes, uniq = pd.factorize(pd.Series(list(clusters)))
    rng = np.random.default_rng(seed)
    counts = np.stack([np.bincount(rng.integers(0, len(uniq), len(uniq)), minlength=len(uniq))
                       for _ in range(int(n_boot))]) if len(uniq) else np.zeros((int(n_boot), 0))
    return counts[:, codes].astype(float)


def effects_table(point: Effects, boots: Sequence[Effects], alpha: float = 0.05) -> pd.DataFrame:
    """Effects of W and H per outcome with percentile cluster-bootstrap intervals (source: fit)."""
    rows = []
    for outcome in OUTCOMES:
        for col in ("W", "H"):
            draws = np.array([b.effect(outcome, col) for b in boots]) if boots else np.array([np.nan])
            rows.append({"outcome": outcome, "term": col, "effect": point.effect(outcome, col),
                         "low": float(np.nanquantile(draws, alpha / 2)), "high": float(np.nanquantile(draws, 1 - alpha / 2)),
                         "scale": {"rounds_after": "rounds", "log_tokens_after": "log tokens",
                                   "resolved": "log-odds"}[outcome], "source": "fit (observational)"})
    return pd.DataFrame(rows)


def validate_by_repository(feats: pd.DataFrame, min_repo_runs: int = 5) -> pd.DataFrame:
    """Leave-one-repository-out: fit on the other repositories (no repository effects), predict the held-out
    repository's rounds and log tokens after the window; mean absolute error beside a no-skill baseline (the
    training runs' mean). ``skill`` = 1 - model error / baseline error (negative: worse than no skill)."""
    rows = []
    feats = feats[feats["rounds_after"] > 0]
    for repo, n in feats["repo"].value_counts().items():
        if n < min_repo_runs:
            continue
        test, train = feats[feats.repo == repo], feats[feats.repo != repo]
        Xtr, _ = design(train, [], with_repos=False)
        Xte, _ = design(test, [], with_repos=False)
        for outcome in ("rounds_after", "log_tokens_after"):
            beta = _ols(Xtr, train[outcome].to_numpy(float), np.ones(len(train)))
            y = test[outcome].to_numpy(float)
            mae = float(np.mean(np.abs(Xte @ beta - y)))
            base = float(np.mean(np.abs(train[outcome].mean() - y)))
            rows.append({"held_out_repo": repo, "n_runs": int(n), "outcome": outcome, "mae_model": mae,
                         "mae_no_skill": base, "skill": 1 - mae / base if base else float("nan"),
                         "source": "fit (observational), held-out repository"})
    return pd.DataFrame(rows)


def pooled_validation(val: pd.DataFrame) -> dict[str, float]:
    """Run-weighted mean errors over held-out repositories, per outcome."""
    out = {}
    for outcome, g in val.groupby("outcome"):
        w = g["n_runs"].to_numpy(float)
        m, b = float(w @ g["mae_model"] / w.sum()), float(w @ g["mae_no_skill"] / w.sum())
        out |= {f"{outcome}.mae_model": m, f"{outcome}.mae_no_skill": b, f"{outcome}.skill": 1 - m / b if b else float("nan")}
    return out

"""Retrieval metrics and the one path normaliser every stage uses.

All functions are pure. Ranked predictions may contain duplicates and unnormalised paths;
both are cleaned the same way everywhere.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np

# Absolute sandbox prefixes seen in agent trajectories and harnesses.
_SANDBOX_PREFIXES = [
    re.compile(r"^/workspace/[^/]+__[^/]+/"),  # OpenHands: /workspace/<repo>__<version>/
    re.compile(r"^/workspace/[^/]+/"),          # OpenHands (other layouts)
    re.compile(r"^/testbed/"),                  # SWE-bench / mini-swe-agent / SWE-agent
    re.compile(r"^/repo/"),
    re.compile(r"^/app/"),
    re.compile(r"^/[^/]+__[^/]+/"),             # SWE-agent: /<owner>__<name>/
]
_LINE_SUFFIX = re.compile(r":\d+(?::\d+)?(?:-\d+)?$")


def normalize_path(path: str, repo_root: str | None = None) -> str:
    """Return a repository-relative POSIX path.

    A leading ``a/`` or ``b/`` is a directory like any other (a repository may have one): git's diff prefixes are
    removed where the text is a diff (:mod:`codegrep.data.patches`, :func:`diff_path`), not here.

    >>> normalize_path("./pkg/a.py")
    'pkg/a.py'
    >>> normalize_path("a/pkg/a.py"), normalize_path("/testbed/b/x.go")
    ('a/pkg/a.py', 'b/x.go')
    >>> normalize_path("/testbed/pkg/a.py:12")
    'pkg/a.py'
    >>> normalize_path("/workspace/django__django__3.0/django/db/models.py")
    'django/db/models.py'
    >>> normalize_path("/home/u/proj/src/x.py", repo_root="/home/u/proj")
    'src/x.py'
    >>> normalize_path("/testbed/a/b.py")
    'a/b.py'
    >>> normalize_path("pkg//sub/../b.py"), normalize_path("../../x/a.py")
    ('pkg/b.py', '../../x/a.py')
    """
    p = path.strip().strip("'\"`").replace("\\", "/")
    p = _LINE_SUFFIX.sub("", p)
    if repo_root:
        root = repo_root.rstrip("/") + "/"
        if p.startswith(root):
            p = p[len(root):]
    for rx in _SANDBOX_PREFIXES:
        if rx.match(p):
            p = rx.sub("", p, count=1)
            break
    parts: list[str] = []
    for part in p.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def diff_path(path: str) -> str:
    """A path as a diff header writes it (``--- a/X``, ``+++ b/X``, ``diff --git a/X b/X``): git's ``a/``/``b/``
    prefix removed, then normalised. Only for text known to be such a header.

    >>> diff_path("a/pkg/x.py"), diff_path("b/a/x.go")
    ('pkg/x.py', 'a/x.go')
    """
    p = path.strip()
    return normalize_path(p[2:] if p.startswith(("a/", "b/")) else p)


def dedupe(paths: Iterable[str]) -> list[str]:
    """Normalise and drop repeats, keeping first-seen rank order.

    >>> dedupe(["./a.py", "a.py", "b.py", "/testbed/a.py"])
    ['a.py', 'b.py']
    """
    seen: dict[str, None] = {}
    for p in paths:
        n = normalize_path(p)
        if n:
            seen.setdefault(n, None)
    return list(seen)


def precision_recall(pred: Sequence[str], gold: Sequence[str]) -> tuple[float, float]:
    """Set precision and recall of a prediction (empty prediction: precision 0).

    >>> precision_recall(["a.py", "b.py"], ["a.py"])
    (0.5, 1.0)
    >>> precision_recall([], ["a.py"])
    (0.0, 0.0)
    >>> precision_recall(["a.py", "./a.py"], ["a.py", "c.py"])
    (1.0, 0.5)
    """
    p, g = set(dedupe(pred)), set(dedupe(gold))
    hit = len(p & g)
    return (hit / len(p) if p else 0.0, hit / len(g) if g else 0.0)


def f_beta(precision: float, recall: float, beta: float = 1.0) -> float:
    """F-beta from precision and recall; beta < 1 weights precision.

    >>> round(f_beta(0.5, 1.0, beta=1.0), 4)
    0.6667
    >>> round(f_beta(0.5, 1.0, beta=0.5), 4)
    0.5556
    >>> f_beta(0.0, 0.0)
    0.0
    """
    b2 = beta * beta
    denom = b2 * precision + recall
    return 0.0 if denom == 0 else (1 + b2) * precision * recall / denom


def acc_at_k(pred: Sequence[str], gold: Sequence[str], k: int) -> float:
    """1.0 if any gold file is among the top k predictions.

    >>> acc_at_k(["x.py", "a.py"], ["a.py"], 1), acc_at_k(["x.py", "a.py"], ["a.py"], 2)
    (0.0, 1.0)
    """
    g = set(dedupe(gold))
    return float(any(p in g for p in dedupe(pred)[:k]))


def recall_at_k(pred: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of gold files among the top k predictions.

    >>> recall_at_k(["a.py", "x.py", "b.py"], ["a.py", "b.py"], 2)
    0.5
    """
    g = set(dedupe(gold))
    return len(g & set(dedupe(pred)[:k])) / len(g) if g else 0.0


def mrr(pred: Sequence[str], gold: Sequence[str]) -> float:
    """Reciprocal rank of the first gold file (0 when none is returned).

    >>> mrr(["x.py", "y.py", "a.py"], ["a.py"])
    0.3333333333333333
    >>> mrr([], ["a.py"])
    0.0
    """
    g = set(dedupe(gold))
    for i, p in enumerate(dedupe(pred), start=1):
        if p in g:
            return 1.0 / i
    return 0.0


def instance_metrics(pred: Sequence[str], gold: Sequence[str], beta: float = 0.5) -> dict[str, float]:
    """Every per-instance metric the harness reports, in one row.

    >>> m = instance_metrics(["a.py", "x.py"], ["a.py"])
    >>> m["precision"], m["recall"], m["acc@1"], m["mrr"], m["n_pred"]
    (0.5, 1.0, 1.0, 1.0, 2)
    """
    p, r = precision_recall(pred, gold)
    return {
        "precision": p,
        "recall": r,
        "f1": f_beta(p, r, 1.0),
        f"f{beta:g}": f_beta(p, r, beta),
        "acc@1": acc_at_k(pred, gold, 1),
        "acc@3": acc_at_k(pred, gold, 3),
        "acc@5": acc_at_k(pred, gold, 5),
        "recall@5": recall_at_k(pred, gold, 5),
        "mrr": mrr(pred, gold),
        "n_pred": len(dedupe(pred)),
    }


def bootstrap_ci(values: Sequence[float], n_boot: int = 2000, alpha: float = 0.05,
                 seed: int = 0) -> tuple[float, float, float]:
    """Mean with a percentile bootstrap (1 - alpha) interval: (mean, low, high).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0, 1.0)
    >>> m, lo, hi = bootstrap_ci([0, 1] * 50, seed=1); lo < m < hi
    True
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (float("nan"),) * 3
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(x.mean()), float(lo), float(hi)


def paired_bootstrap_diff(a: Sequence[float], b: Sequence[float], n_boot: int = 2000,
                          alpha: float = 0.05, seed: int = 0) -> tuple[float, float, float]:
    """Mean of b - a over paired instances with a bootstrap interval.

    >>> paired_bootstrap_diff([1, 2, 3], [2, 3, 4])
    (1.0, 1.0, 1.0)
    """
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:  # numpy would broadcast a length-1 side silently
        raise ValueError(f"paired_bootstrap_diff needs the same length on both sides, got {xa.size} and {xb.size}")
    d = xb - xa
    return bootstrap_ci(d, n_boot=n_boot, alpha=alpha, seed=seed)


def macro_average(rows: Sequence[dict[str, float]], keys: Sequence[str] | None = None,
                  with_ci: bool = False, seed: int = 0) -> dict[str, float]:
    """Macro average of per-instance metric rows; with_ci adds ``<key>_lo``/``<key>_hi``.

    >>> macro_average([{"precision": 1.0}, {"precision": 0.0}])
    {'n': 2, 'precision': 0.5}
    """
    out: dict[str, float] = {"n": len(rows)}
    if not rows:
        return out
    keys = keys or [k for k, v in rows[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for k in keys:
        vals = [float(r[k]) for r in rows if r.get(k) is not None]
        if with_ci:
            m, lo, hi = bootstrap_ci(vals, seed=seed)
            out.update({k: m, f"{k}_lo": lo, f"{k}_hi": hi})
        else:
            out[k] = float(np.mean(vals)) if vals else float("nan")
    return out

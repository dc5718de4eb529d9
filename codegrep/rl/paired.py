"""The ablation's endpoint, pure and doctested: per-seed paired log-ratios, a t-interval, a sign test,
and the verdict rule (issue 15).

Each seed trains every arm from the same initial policy with the same task order and sampler state,
so the unit of comparison is the seed: ``d_s = log(KL_arm,s / KL_base,s)``. Their mean estimates the
log of the geometric-mean ratio; the t-interval and the sign test are over seeds (n = seeds, small).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

EQUIVALENCE = (0.67, 1.5)
"""A ratio inside this band is called "no difference" (only when the whole interval lies inside)."""


def paired_log_ratios(num: Sequence[float], den: Sequence[float]) -> np.ndarray:
    """``log(num_s / den_s)`` per seed; NaN where either value is not positive (a ratio of zero drift
    is undefined, not zero).

    >>> paired_log_ratios([0.2, 0.0], [0.1, 0.1]).round(3).tolist()
    [0.693, nan]
    """
    a, b = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    out = np.full(a.shape, np.nan)
    ok = (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b)
    out[ok] = np.log(a[ok] / b[ok])
    return out


def t_interval(x: Sequence[float], level: float = 0.90) -> tuple[float, float, float]:
    """(mean, lo, hi): Student-t interval of the mean of ``x`` (NaNs dropped); NaN bounds for n < 2.

    >>> [round(v, 3) for v in t_interval([0.1, 0.3, 0.2])]
    [0.2, 0.031, 0.369]
    >>> t_interval([0.5])[1:]
    (nan, nan)
    """
    from scipy import stats

    v = np.asarray(x, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if v.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def sign_test_p(x: Sequence[float]) -> float:
    """Two-sided exact sign test of "median 0" (zeros and NaNs dropped); 1.0 with no informative pair.

    >>> sign_test_p([0.1, 0.2, 0.3]), sign_test_p([0.1, -0.2]), round(sign_test_p([1.0] * 8), 4)
    (0.25, 1.0, 0.0078)
    """
    v = np.asarray(x, dtype=np.float64)
    v = v[np.isfinite(v) & (v != 0)]
    n, k = v.size, int((v > 0).sum())
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2 ** n
    return float(min(1.0, 2 * tail))


def verdict(lo: float, hi: float, n: int, level: float = 0.90, band: tuple[float, float] = EQUIVALENCE,
            num: str = "advantage", den: str = "reward") -> str:
    """The verdict rule on a log-ratio interval ``[lo, hi]``: "no difference" only when the whole interval
    lies inside ``log(band)``; otherwise the direction, or "inconclusive" when the interval spans 1.

    >>> verdict(-0.1, 0.1, 8)
    'no difference: the 90% interval of the KL ratio advantage/reward, [0.90, 1.11], lies inside [0.67, 1.5] (n = 8 paired seeds)'
    >>> verdict(-1.5, -0.4, 8).split(":")[0]
    'advantage layer drifts LESS than reward layer'
    >>> verdict(-1.5, 0.4, 2).split(":")[0]
    'inconclusive'
    >>> verdict(float("nan"), float("nan"), 1).split(":")[0]
    'undefined'
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return (f"undefined: {n} paired seed(s) with positive KL in both arms; an interval needs at least 2 "
                "(and zero drift makes the ratio undefined)")
    r_lo, r_hi = math.exp(lo), math.exp(hi)
    ci = f"the {level:.0%} interval of the KL ratio {num}/{den}, [{r_lo:.2f}, {r_hi:.2f}]"
    tail = f" (n = {n} paired seeds)"
    if r_lo >= band[0] and r_hi <= band[1]:
        return f"no difference: {ci}, lies inside [{band[0]:g}, {band[1]:g}]{tail}"
    if r_hi < 1:
        return f"{num} layer drifts LESS than {den} layer: {ci}, lies below 1{tail}"
    if r_lo > 1:
        return f"{num} layer drifts MORE than {den} layer: {ci}, lies above 1{tail}"
    return f"inconclusive: {ci}, contains 1 and leaves [{band[0]:g}, {band[1]:g}]{tail}"


def endpoint(num: Sequence[float], den: Sequence[float], level: float = 0.90, num_name: str = "advantage",
             den_name: str = "reward") -> dict[str, float | int | str]:
    """Everything the headline records for one comparison of final probe KL, paired by seed.

    >>> e = endpoint([0.02, 0.03, 0.025], [0.04, 0.05, 0.06])
    >>> e["n_paired_seeds"], round(e["kl_ratio_geomean"], 3), e["verdict"].split(":")[0]
    (3, 0.5, 'advantage layer drifts LESS than reward layer')
    """
    d = paired_log_ratios(num, den)
    mean, lo, hi = t_interval(d, level)
    n = int(np.isfinite(d).sum())
    return {"kl_log_ratio_mean": mean, "kl_log_ratio_lo": lo, "kl_log_ratio_hi": hi, "n_paired_seeds": n,
            "kl_ratio_geomean": math.exp(mean) if math.isfinite(mean) else math.nan,
            "kl_ratio_lo": math.exp(lo) if math.isfinite(lo) else math.nan,
            "kl_ratio_hi": math.exp(hi) if math.isfinite(hi) else math.nan,
            "sign_test_p": sign_test_p(d), "interval_level": level,
            "verdict": verdict(lo, hi, n, level, num=num_name, den=den_name)}

"""Where the efficiency signal enters GRPO: the reward layer, the advantage layer, or nowhere.

Notation for one group of G completions of the same task: task reward ``r_i = F_beta_i + w_f * format_i``,
efficiency cost ``c_i`` and the group normaliser ``N(x)_i = (x_i - mean(x)) / (std(x) + eps)`` (unbiased
std, eps = 1e-4, exactly TRL's ``scale_rewards="group"``).

* ``none``:               ``A_i = N(r)_i``
* ``reward``:             ``A_i = N(r - lambda * c)_i``      (cost folded into the scalar reward)
* ``advantage``:          ``A_i = N(r)_i + lambda * N(-c)_i`` (cost normalised on its own, then added)
* ``gated``:              ``A_i = N(r)_i + lambda * [i in T] * N_T(-c)_i``, ``T`` = the group's top-reward
  rollouts that retrieved something (``F_beta > 0``), ``N_T`` normalising within ``T``: efficiency is
  only rewarded among the best answers, never for failing cheaply (an all-failed group gets none).
* ``normalize_then_sum``: GDPO-style, TRL's ``multi_objective_aggregation="normalize_then_sum"``:
  ``s_i = N(F)_i + w_f N(format)_i + lambda N(-c)_i`` then ``A = (s - mean_batch(s)) / (std_batch(s) + eps)``.

In the reward layer the cost competes with the task reward inside one normaliser, so when rewards
vary little a small cost difference is blown up to unit scale; in the advantage layer the task
advantage keeps its scale and the efficiency term is bounded by ``lambda * (G - 1) / sqrt(G)`` (one
outlier against G - 1 equal costs; ``max_i |N(x)_i| <= (G - 1) / sqrt(G)`` for the unbiased std).

Scale invariance: in a group whose task rewards all tie, ``N(r - lambda c) = N(-c)`` while the advantage
layer gives ``lambda N(-c)``, so the reward layer's advantages are exactly ``1 / lambda`` times the
advantage layer's (up to eps). When every group of a batch ties, the two policy gradients are
proportional and Adam (invariant to a constant gradient scale) takes the same step: the layers can
only differ through batches that mix tied groups with groups whose rewards differ.
``advantage_parts`` splits each layer's advantage exactly into a correctness and an efficiency part.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

LAYERS = ("none", "reward", "advantage", "gated", "normalize_then_sum")
POST_NORM_LAYERS = ("advantage", "gated")  # efficiency added after TRL's normalisation
EPS = 1e-4  # TRL's constant


def group_normalize(values: Sequence[float], group_size: int, scale: bool = True) -> np.ndarray:
    """Subtract each group's mean and (when ``scale``) divide by its unbiased std + 1e-4.

    >>> group_normalize([1.0, 0.0, 2.0, 2.0], group_size=2).round(3).tolist()
    [0.707, -0.707, 0.0, 0.0]
    >>> group_normalize([1.0, 0.0], group_size=2, scale=False).tolist()
    [0.5, -0.5]
    """
    x = np.asarray(values, dtype=np.float64)
    if group_size < 1 or x.size % group_size:
        raise ValueError(f"{x.size} values do not split into groups of {group_size}")
    g = x.reshape(-1, group_size)
    centred = g - g.mean(axis=1, keepdims=True)
    if scale:
        std = g.std(axis=1, ddof=1, keepdims=True) if group_size > 1 else np.zeros_like(centred)
        centred = centred / (std + EPS)
    return centred.reshape(-1)


def batch_normalize(values: Sequence[float]) -> np.ndarray:
    """Whole-batch standardisation (TRL's final step of ``normalize_then_sum``).

    >>> batch_normalize([0.0, 2.0]).round(3).tolist()
    [-0.707, 0.707]
    """
    x = np.asarray(values, dtype=np.float64)
    std = x.std(ddof=1) if x.size > 1 else 0.0
    return (x - x.mean()) / (std + EPS)


def reward_weights(layer: str, format_weight: float, lam: float) -> list[float]:
    """TRL ``reward_weights`` for the (retrieval, format, efficiency) reward functions.

    Only the reward layer and GDPO put the efficiency reward into TRL's own aggregation; the
    advantage and gated layers add it after TRL's normalisation (``efficiency_advantage``,
    ``gated_efficiency_advantage``).

    >>> reward_weights("reward", 0.2, 0.5), reward_weights("advantage", 0.2, 0.5)
    ([1.0, 0.2, 0.5], [1.0, 0.2, 0.0])
    """
    if layer not in LAYERS:
        raise ValueError(f"efficiency layer {layer!r} is not one of {LAYERS}")
    return [1.0, float(format_weight), float(lam) if layer in ("reward", "normalize_then_sum") else 0.0]


def max_abs_normalized(group_size: int) -> float:
    """The largest ``|N(x)_i|`` a group of ``group_size`` can produce: ``(G - 1) / sqrt(G)``, reached by one
    outlier against G - 1 equal values; the advantage-layer efficiency term is bounded by lambda times it.

    >>> round(max_abs_normalized(4), 4), round(float(np.abs(group_normalize([1.0, 0, 0, 0], 4)).max()), 4)
    (1.5, 1.4997)
    """
    return float((group_size - 1) / np.sqrt(group_size))


def tied_groups(rewards: Sequence[float], group_size: int, tol: float = 1e-9) -> np.ndarray:
    """Per group: True when every rollout of the group has the same task reward (zero variance).

    >>> tied_groups([1.0, 1.0, 0.0, 0.5], 2).tolist()
    [True, False]
    """
    g = np.asarray(rewards, dtype=np.float64).reshape(-1, group_size)
    return np.ptp(g, axis=1) <= tol


def gated_efficiency_advantage(f_beta: Sequence[float], reward: Sequence[float], cost: Sequence[float],
                               group_size: int, lam: float, scale: bool = True) -> np.ndarray:
    """The gated efficiency term: ``lambda * N_T(-c)`` on the group's top-reward rollouts with F-beta > 0
    (``T``), zero elsewhere and in groups where ``T`` has fewer than two rollouts.

    >>> f, r, c = [1.0, 1.0, 0.0, 0.0], [1.2, 1.2, 0.2, 0.2], [0.25, 0.75, 0.0, 1.0]
    >>> gated_efficiency_advantage(f, r, c, 4, lam=0.1).round(3).tolist()  # the failures get nothing
    [0.071, -0.071, 0.0, 0.0]
    >>> gated_efficiency_advantage([0.0, 0.0], [0.2, 0.2], [0.0, 1.0], 2, lam=0.1).tolist()  # all failed
    [0.0, 0.0]
    """
    f = np.asarray(f_beta, dtype=np.float64).reshape(-1, group_size)
    r = np.asarray(reward, dtype=np.float64).reshape(-1, group_size)
    c = np.asarray(cost, dtype=np.float64).reshape(-1, group_size)
    out = np.zeros_like(c)
    for k in range(c.shape[0]):
        top = (r[k] >= r[k].max() - 1e-9) & (f[k] > 0)
        if top.sum() >= 2:
            out[k, top] = lam * group_normalize(-c[k, top], int(top.sum()), scale)
    return out.reshape(-1)


def efficiency_advantage(cost: Sequence[float], group_size: int, lam: float, scale: bool = True) -> np.ndarray:
    """The advantage-layer term ``lambda * N(-c)``; zero for a group whose costs are all equal.

    >>> efficiency_advantage([1.0, 3.0, 2.0, 2.0], group_size=2, lam=0.5).round(3).tolist()
    [0.354, -0.354, 0.0, 0.0]
    """
    return lam * group_normalize(-np.asarray(cost, dtype=np.float64), group_size, scale)


def combined_advantages(f_beta: Sequence[float], fmt: Sequence[float], cost: Sequence[float], group_size: int,
                        layer: str, lam: float, format_weight: float = 0.0, scale: bool = True) -> np.ndarray:
    """Per-completion advantages for one efficiency layer (the maths in the module docstring).

    A group where every completion has the same F-beta but different costs: the reward layer turns
    a tiny cost gap into a full unit-scale advantage, the advantage layer into a lambda-scaled one.

    >>> f, fm, c = [1.0, 1.0], [1.0, 1.0], [0.25, 0.75]
    >>> combined_advantages(f, fm, c, 2, "none", lam=0.1).round(3).tolist()
    [0.0, 0.0]
    >>> combined_advantages(f, fm, c, 2, "reward", lam=0.1).round(3).tolist()
    [0.705, -0.705]
    >>> combined_advantages(f, fm, c, 2, "advantage", lam=0.1).round(3).tolist()
    [0.071, -0.071]
    """
    correctness, efficiency = advantage_parts(f_beta, fmt, cost, group_size, layer, lam, format_weight, scale)
    return correctness + efficiency


def advantage_parts(f_beta: Sequence[float], fmt: Sequence[float], cost: Sequence[float], group_size: int,
                    layer: str, lam: float, format_weight: float = 0.0,
                    scale: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """One layer's advantages split exactly into (correctness part, efficiency part); they sum to the
    advantage. The reward layer's split is linear in its shared normaliser:
    ``N(r - lambda c) = (r - mean r) / s - lambda (c - mean c) / s`` with ``s = std(r - lambda c) + eps``.

    In an all-tied group the reward layer's advantage is *all* efficiency, at unit scale:

    >>> f, fm, c = [0.0, 0.0], [1.0, 1.0], [0.25, 0.75]
    >>> [p.round(3).tolist() for p in advantage_parts(f, fm, c, 2, "reward", lam=0.1, format_weight=0.2)]
    [[0.0, 0.0], [0.705, -0.705]]
    >>> [p.round(3).tolist() for p in advantage_parts(f, fm, c, 2, "gated", lam=0.1, format_weight=0.2)]
    [[0.0, 0.0], [0.0, 0.0]]
    """
    w = reward_weights(layer, format_weight, lam)
    f = np.asarray(f_beta, dtype=np.float64)
    r = f * w[0] + np.asarray(fmt, dtype=np.float64) * w[1]
    c = np.asarray(cost, dtype=np.float64)
    if layer in ("none", "advantage", "gated"):
        corr = group_normalize(r, group_size, scale)
        if layer == "none":
            return corr, np.zeros_like(corr)
        if layer == "advantage":
            return corr, efficiency_advantage(c, group_size, lam, scale)
        return corr, gated_efficiency_advantage(f, r, c, group_size, lam, scale)
    if layer == "reward":
        r_c = group_normalize(r, group_size, scale=False)
        c_c = group_normalize(-w[2] * c, group_size, scale=False)
        if not scale:
            return r_c, c_c
        total = (r_c + c_c).reshape(-1, group_size)
        s = (total.std(axis=1, ddof=1, keepdims=True) if group_size > 1 else np.zeros((total.shape[0], 1))) + EPS
        return (r_c.reshape(-1, group_size) / s).reshape(-1), (c_c.reshape(-1, group_size) / s).reshape(-1)
    parts = [group_normalize(x, group_size) for x in (f_beta, fmt, -c)]
    corr, eff = w[0] * parts[0] + w[1] * parts[1], w[2] * parts[2]
    total = corr + eff
    std = (total.std(ddof=1) if total.size > 1 else 0.0) + EPS
    return (corr - corr.mean()) / std, (eff - eff.mean()) / std

"""Where the efficiency signal enters GRPO: the reward layer, the advantage layer, or nowhere.

Notation for one group of G completions of the same task: task reward ``r_i = F_beta_i + w_f * format_i``,
efficiency cost ``c_i`` and the group normaliser ``N(x)_i = (x_i - mean(x)) / (std(x) + eps)`` (unbiased
std, eps = 1e-4, exactly TRL's ``scale_rewards="group"``).

* ``none``:               ``A_i = N(r)_i``
* ``reward``:             ``A_i = N(r - lambda * c)_i``      (cost folded into the scalar reward)
* ``advantage``:          ``A_i = N(r)_i + lambda * N(-c)_i`` (cost normalised on its own, then added)
* ``normalize_then_sum``: GDPO-style, TRL's ``multi_objective_aggregation="normalize_then_sum"``:
  ``s_i = N(F)_i + w_f N(format)_i + lambda N(-c)_i`` then ``A = (s - mean_batch(s)) / (std_batch(s) + eps)``.

In the reward layer the cost competes with the task reward inside one normaliser, so when rewards
vary little a small cost difference is blown up to unit scale; in the advantage layer the task
advantage keeps its scale and the efficiency term is bounded by lambda * sqrt(G - 1).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

LAYERS = ("none", "reward", "advantage", "normalize_then_sum")
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
    advantage layer adds it after TRL's normalisation (``efficiency_advantage``).

    >>> reward_weights("reward", 0.2, 0.5), reward_weights("advantage", 0.2, 0.5)
    ([1.0, 0.2, 0.5], [1.0, 0.2, 0.0])
    """
    if layer not in LAYERS:
        raise ValueError(f"efficiency layer {layer!r} is not one of {LAYERS}")
    return [1.0, float(format_weight), float(lam) if layer in ("reward", "normalize_then_sum") else 0.0]


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
    w = reward_weights(layer, format_weight, lam)
    r = np.asarray(f_beta, dtype=np.float64) * w[0] + np.asarray(fmt, dtype=np.float64) * w[1]
    c = np.asarray(cost, dtype=np.float64)
    if layer in ("none", "advantage"):
        adv = group_normalize(r, group_size, scale)
        return adv + efficiency_advantage(c, group_size, lam, scale) if layer == "advantage" else adv
    if layer == "reward":
        return group_normalize(r - w[2] * c, group_size, scale)
    parts = [group_normalize(x, group_size) for x in (f_beta, fmt, -c)]
    return batch_normalize(sum(wk * pk for wk, pk in zip(w, parts)))

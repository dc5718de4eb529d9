"""Episode rewards: retrieval F-beta, a format term, and the efficiency cost (all pure).

The rollout (``codegrep.rl.rollout``) turns every episode into an :class:`EpisodeScore`; the
trainer's reward functions only read those numbers back, so the maths lives here, doctested.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from codegrep.metrics import f_beta, precision_recall


@dataclass
class EpisodeScore:
    """What one finished episode scored; every field is logged per step."""

    precision: float
    """Precision of the submitted files against the target files."""
    recall: float
    """Recall of the submitted files against the target files."""
    f_beta: float
    """F-beta of precision and recall (beta < 1 favours precision)."""
    format: float
    """Format term in [0, 1]: a valid submit, discounted by unparseable turns."""
    rounds: int
    """Assistant turns taken (each turn's tool calls run in parallel)."""
    tool_calls: int
    """grep/glob/read calls issued over the whole episode (submit excluded)."""
    tokens: int
    """Tokens the model generated over the whole episode (observations excluded)."""
    efficiency_cost: float
    """Weighted, normalised mix of rounds, tool calls and tokens (see :func:`efficiency_cost`)."""
    submitted: bool
    """Whether the episode ended with a ``submit`` call."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def retrieval_scores(submitted: Sequence[str] | None, targets: Sequence[str],
                     beta: float = 0.5) -> tuple[float, float, float]:
    """(precision, recall, F-beta) of a submission; no submission scores zero.

    >>> retrieval_scores(["a.py", "b.py"], ["a.py"])
    (0.5, 1.0, 0.5555555555555556)
    >>> retrieval_scores(None, ["a.py"])
    (0.0, 0.0, 0.0)
    >>> retrieval_scores(["./a.py"], ["a.py", "c.py"], beta=1.0)
    (1.0, 0.5, 0.6666666666666666)
    """
    if not submitted:
        return 0.0, 0.0, 0.0
    p, r = precision_recall(list(submitted), list(targets))
    return p, r, f_beta(p, r, beta)


def format_score(submitted: Sequence[str] | None, parse_errors: int, rounds: int) -> float:
    """1 for an episode that submits a non-empty list with every turn parseable; each turn with a
    parse error takes away its share; no submission (or an empty one) scores 0.

    >>> format_score(["a.py"], parse_errors=0, rounds=2)
    1.0
    >>> format_score(["a.py"], parse_errors=1, rounds=4)
    0.75
    >>> format_score(None, parse_errors=0, rounds=3), format_score([], parse_errors=0, rounds=1)
    (0.0, 0.0)
    """
    if not submitted:
        return 0.0
    return max(0.0, 1.0 - parse_errors / max(rounds, 1))


def efficiency_cost(rounds: int, tool_calls: int, tokens: int,
                    weights: Sequence[float] = (1.0, 0.0, 0.0),
                    scales: Sequence[float] = (4.0, 32.0, 1024.0)) -> float:
    """Cost of an episode: ``sum_i w_i * x_i / s_i`` over (rounds, tool calls, tokens).

    ``scales`` are the budgets (max turns, max calls, max tokens), so each normalised count is in
    [0, 1] and the cost is in [0, sum(weights)].

    >>> efficiency_cost(2, 8, 256, weights=(1, 0, 0), scales=(4, 32, 1024))
    0.5
    >>> efficiency_cost(2, 8, 256, weights=(0.5, 0.25, 0.25), scales=(4, 32, 1024))
    0.375
    >>> efficiency_cost(0, 0, 0)
    0.0
    """
    if len(weights) != 3 or len(scales) != 3:
        raise ValueError(f"efficiency weights/scales need 3 entries (rounds, tool_calls, tokens); "
                         f"got {list(weights)} / {list(scales)}")
    counts = (rounds, tool_calls, tokens)
    return float(sum(w * x / s for w, x, s in zip(weights, counts, scales)))


def score_episode(submitted: Sequence[str] | None, targets: Sequence[str], *, rounds: int,
                  tool_calls: int, tokens: int, parse_errors: int, beta: float = 0.5,
                  cost_weights: Sequence[float] = (1.0, 0.0, 0.0),
                  cost_scales: Sequence[float] = (4.0, 32.0, 1024.0)) -> EpisodeScore:
    """All reward components of one episode.

    >>> s = score_episode(["a.py"], ["a.py"], rounds=2, tool_calls=3, tokens=100, parse_errors=0)
    >>> s.f_beta, s.format, s.efficiency_cost, s.submitted
    (1.0, 1.0, 0.5, True)
    """
    p, r, f = retrieval_scores(submitted, targets, beta)
    return EpisodeScore(precision=p, recall=r, f_beta=f, format=format_score(submitted, parse_errors, rounds),
                        rounds=rounds, tool_calls=tool_calls, tokens=tokens,
                        efficiency_cost=efficiency_cost(rounds, tool_calls, tokens, cost_weights, cost_scales),
                        submitted=submitted is not None)


# TRL reward functions: they read the per-episode numbers the rollout returned as extra fields.
def retrieval_reward(completions: list, f_beta: list[float], **_: Any) -> list[float]:
    """Retrieval F-beta per completion.

    >>> retrieval_reward([None, None], f_beta=[0.5, 1.0])
    [0.5, 1.0]
    """
    return [float(x) for x in f_beta]


def format_reward(completions: list, format: list[float], **_: Any) -> list[float]:
    """Format term per completion.

    >>> format_reward([None], format=[0.75])
    [0.75]
    """
    return [float(x) for x in format]


def efficiency_reward(completions: list, efficiency_cost: list[float], **_: Any) -> list[float]:
    """Negated efficiency cost per completion (higher is better, like every reward).

    >>> efficiency_reward([None, None], efficiency_cost=[0.5, 0.0])
    [-0.5, -0.0]
    """
    return [-float(x) for x in efficiency_cost]


REWARD_FUNCS = (retrieval_reward, format_reward, efficiency_reward)

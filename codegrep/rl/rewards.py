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
    retrieval: float = 0.0
    """The retrieval reward trained on: ``f_beta``, or ``rank_credit`` (see :func:`rank_credit`)."""

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


RETRIEVAL_REWARDS = ("f_beta", "rank")


def rank_credit(submitted: Sequence[str] | None, targets: Sequence[str], shown: Sequence[str] = (),
                seen: float = 0.25) -> float:
    """A retrieval reward a weak policy can move: ``1 / rank`` of the first target file in the submission (1 when
    it is first: P@1), else ``seen`` when the episode submitted something and one of its observations showed a
    target file (it searched well but chose badly), else 0. No submission scores 0.

    >>> rank_credit(["a.py", "b.py"], ["a.py"]), rank_credit(["b.py", "a.py"], ["a.py"])
    (1.0, 0.5)
    >>> rank_credit(["b.py"], ["a.py"], shown=["c.py", "a.py"]), rank_credit(["b.py"], ["a.py"])
    (0.25, 0.0)
    >>> rank_credit(None, ["a.py"], shown=["a.py"]), rank_credit(["./a.py"], ["a.py"])
    (0.0, 1.0)
    """
    from codegrep.metrics import normalize_path

    if not submitted:
        return 0.0
    gold = {normalize_path(t) for t in targets}
    for rank, path in enumerate(submitted, 1):
        if normalize_path(path) in gold:
            return 1.0 / rank
    return float(seen) if any(normalize_path(p) in gold for p in shown) else 0.0


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
                  cost_scales: Sequence[float] = (4.0, 32.0, 1024.0), reward: str = "f_beta",
                  shown: Sequence[str] = (), seen: float = 0.25) -> EpisodeScore:
    """All reward components of one episode; ``reward`` picks the retrieval reward (``f_beta`` or ``rank``).

    >>> s = score_episode(["a.py"], ["a.py"], rounds=2, tool_calls=3, tokens=100, parse_errors=0)
    >>> s.f_beta, s.format, s.efficiency_cost, s.submitted, s.retrieval
    (1.0, 1.0, 0.5, True, 1.0)
    >>> score_episode(["b.py"], ["a.py"], rounds=2, tool_calls=1, tokens=9, parse_errors=0, reward="rank",
    ...               shown=["a.py"]).retrieval
    0.25
    """
    if reward not in RETRIEVAL_REWARDS:
        raise ValueError(f"retrieval reward must be one of {RETRIEVAL_REWARDS}, got {reward!r}")
    p, r, f = retrieval_scores(submitted, targets, beta)
    credit = f if reward == "f_beta" else rank_credit(submitted, targets, shown, seen)
    return EpisodeScore(precision=p, recall=r, f_beta=f, format=format_score(submitted, parse_errors, rounds),
                        rounds=rounds, tool_calls=tool_calls, tokens=tokens,
                        efficiency_cost=efficiency_cost(rounds, tool_calls, tokens, cost_weights, cost_scales),
                        submitted=submitted is not None, retrieval=credit)


# TRL reward functions: they read the per-episode numbers the rollout returned as extra fields.
def retrieval_reward(completions: list, retrieval: list[float], **_: Any) -> list[float]:
    """Retrieval reward per completion (F-beta or the rank credit, ``EpisodeScore.retrieval``).

    >>> retrieval_reward([None, None], retrieval=[0.5, 1.0])
    [0.5, 1.0]
    """
    return [float(x) for x in retrieval]


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

"""The replay cost model: what a recorded rollout would have cost with candidate files (a MODEL, not a run).

A real mini-swe-agent trajectory is a list of steps, each with its measured prompt and completion
tokens, the files it viewed, and the context it added (``added``: the growth of the next step's
prompt, so assistant message plus observation, measured). Given candidate files:

* no correct candidate: the search stays as recorded (missed targets leave the original search);
* at least one correct candidate: the search-only steps (search, list, view; no run, no write)
  before the first view of a target file are removed (the agent starts at a hinted target), and
  every later prompt shrinks by their ``added`` tokens; steps that ran or wrote code (reproducing
  the bug) stay;
* every wrong candidate the kept steps never view is opened with probability ``wrong_read_prob``:
  one extra step at the start costing a measured file-read step, whose observation stays in the
  context of every later step;
* the hint itself is in every prompt (its characters / the measured characters per token).

Resolution keeps the recorded verdict, except that with ``misleading_unresolve_prob`` > 0 a resolved
rollout whose hint holds no correct file is marked unresolved with that probability (default 0).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from codegrep.data.paths import SOURCE_SUFFIXES, suffix_alternation
from codegrep.downstream.agents import DownstreamResult, candidate_hint
from codegrep.metrics import dedupe, diff_path

_DIFF_HEADERS = ("diff --git ", "--- ", "+++ ")
_PATH = re.compile(r"(?<![\w/.-])(?:\./|/testbed/)?((?:[\w.-]+/)+[\w.-]+\.(?:"
                   + suffix_alternation(SOURCE_SUFFIXES + (".rst", ".cfg", ".toml", ".txt")) + r"))\b")


@dataclass
class Step:
    """One model call of a recorded rollout."""

    prompt_tokens: int
    """Prompt tokens of the call (measured)."""
    completion_tokens: int
    """Completion tokens of the call (measured)."""
    added: int
    """Context tokens this step adds to every later prompt (next prompt minus this prompt)."""
    viewed: tuple[str, ...] = ()
    """Repository files the step's command viewed."""
    searched: bool = False
    """Whether the step searched, listed or found files."""
    acted: bool = False
    """Whether the step ran code or wrote a file (reproduction scripts, edits): never removed as search."""

    @property
    def search_only(self) -> bool:
        """Looked at the repository (search, list, view) and did nothing else."""
        return (self.searched or bool(self.viewed)) and not self.acted


@dataclass
class Trace:
    """A recorded rollout reduced to what the replay model needs."""

    instance_id: str
    repo: str
    resolved: bool
    gold: list[str]
    """Files the reference fix touches (the targets a correct candidate must be one of)."""
    steps: list[Step]
    observed_paths: list[str] = field(default_factory=list)
    """Repository paths that appeared in the rollout's observations (realistic distractors)."""
    created: list[str] = field(default_factory=list)
    """Files the agent created itself (scripts): never used as distractors."""
    chars_per_token: float | None = None
    """Characters per prompt token of the first prompt (measured)."""
    issue_chars: int | None = None
    """Characters of the issue text the agent was given (an instance covariate of the observational fit)."""

    @property
    def rounds(self) -> int:
        return len(self.steps)

    @property
    def tokens(self) -> int:
        return sum(s.prompt_tokens + s.completion_tokens for s in self.steps)

    def first_target_step(self) -> int | None:
        """Index of the first step that views a gold file (None: never viewed)."""
        gold = set(self.gold)
        return next((i for i, s in enumerate(self.steps) if gold & set(s.viewed)), None)

    def read_cost(self, path: str) -> tuple[int, int] | None:
        """(completion, added) of the first step that viewed only ``path``, if any."""
        return next(((s.completion_tokens, s.added) for s in self.steps if s.viewed == (path,)), None)

    def distractors(self) -> list[str]:
        """Non-gold files the agent viewed, then non-gold paths from observations (first-seen order);
        files the agent created are left out."""
        gold = set(self.gold) | set(self.created)
        viewed = [p for s in self.steps for p in s.viewed]
        return [p for p in dict.fromkeys(viewed + self.observed_paths) if p not in gold]


@dataclass
class ReplayParams:
    """Parameters of the replay model: measured from traces (``measure_params``) or stated in config."""

    read_completion: float = 0.0
    """Completion tokens of a file-read step (measured: median over single-file view steps)."""
    read_added: float = 0.0
    """Context tokens a read of an unseen file adds (measured: mean over single-file view steps)."""
    chars_per_token: float = 4.0
    """Characters per token, for the hint's own cost (measured from first prompts)."""
    wrong_read_prob: float = 1.0
    """Probability the agent opens a wrong candidate it would not otherwise view (stated; 1 = pessimistic)."""
    misleading_unresolve_prob: float = 0.0
    """Probability a hint with no correct file turns a resolved rollout unresolved (stated; 0 = no effect)."""

    def with_overrides(self, values: dict[str, Any] | None) -> "ReplayParams":
        """Config values override measured ones (unknown keys raise)."""
        from codegrep.config import check_keys

        check_keys(values, self.__dataclass_fields__, "downstream.replay.params")
        return ReplayParams(**{**self.__dict__, **{k: v for k, v in (values or {}).items() if v is not None}})


def measure_params(traces: Sequence[Trace]) -> ReplayParams:
    """Read-step costs and characters per token, measured over all traces' single-file view steps."""
    reads = [s for t in traces for s in t.steps[:-1] if len(s.viewed) == 1]
    cpt = [t.chars_per_token for t in traces if t.chars_per_token]
    if not reads:
        raise ValueError("no single-file view step in the traces: cannot measure the read cost")
    return ReplayParams(read_completion=float(np.median([s.completion_tokens for s in reads])),
                        read_added=float(np.mean([s.added for s in reads])),
                        chars_per_token=float(np.median(cpt)) if cpt else 4.0)


def steps_from_usage(usage: Sequence[tuple[int, int]], viewed: Sequence[Sequence[str]],
                     searched: Sequence[bool], acted: Sequence[bool] | None = None) -> list[Step]:
    """Steps from per-call (prompt, completion) usage; ``added`` = growth of the next prompt.

    >>> [s.added for s in steps_from_usage([(10, 2), (20, 3), (26, 1)], [(), ("a.py",), ()], [1, 0, 0])]
    [10, 6, 0]
    """
    steps = []
    for i, (p, c) in enumerate(usage):
        nxt = usage[i + 1][0] if i + 1 < len(usage) else p
        steps.append(Step(p, c, max(nxt - p, 0), tuple(viewed[i]), bool(searched[i]), bool(acted and acted[i])))
    return steps


def observed_paths(text: str) -> list[str]:
    """Repository-looking file paths in an observation; on a diff header line (``diff --git a/X b/X``, ``--- a/X``,
    ``+++ b/X``) without git's ``a/``/``b/`` prefix (elsewhere ``a/`` is a directory like any other).

    >>> observed_paths("./pkg/a.py:3:x\\n/testbed/pkg/b.pyi\\nREADME")
    ['pkg/a.py', 'pkg/b.pyi']
    >>> observed_paths("diff --git a/pkg/a.py b/pkg/a.py\\n--- a/pkg/a.py\\n+++ b/pkg/a.py\\na/x.py:1:y")
    ['pkg/a.py', 'a/x.py']
    >>> observed_paths("cmd/api/main.go:12:func main() {\\nsrc/App.tsx\\nweb/app.js")  # any source language
    ['cmd/api/main.go', 'src/App.tsx', 'web/app.js']
    """
    found: list[str] = []
    for line in (text or "").split("\n"):
        paths = _PATH.findall(line)
        found += map(diff_path, paths) if line.startswith(_DIFF_HEADERS) else paths
    return dedupe(found)


def _hit_drop(trace: Trace, hits: list[str]) -> set[int]:
    first = trace.first_target_step()
    return {i for i in range(first) if trace.steps[i].search_only} if hits and first else set()


def _inserted_reads(trace: Trace, wrong: list[str], kept_views: set[str], params: ReplayParams,
                    rng: np.random.Generator) -> list[tuple[float, float]]:
    reads = []
    for path in wrong:
        if path in kept_views or rng.random() >= params.wrong_read_prob:
            continue  # already read later anyway, or not opened
        reads.append(trace.read_cost(path) or (params.read_completion, params.read_added))
    return reads


def replay(trace: Trace, candidates: Sequence[str] | None, params: ReplayParams,
           rng: np.random.Generator | None = None) -> DownstreamResult:
    """The modelled rollout of ``trace`` with ``candidates`` (None = the recorded rollout itself)."""
    rng = rng or np.random.default_rng(0)
    if candidates is None:
        return _result(trace, None, trace.resolved, trace.rounds, sum(s.prompt_tokens for s in trace.steps),
                       sum(s.completion_tokens for s in trace.steps), {})
    cand, gold = dedupe(candidates), set(trace.gold)
    hits, wrong = [c for c in cand if c in gold], [c for c in cand if c not in gold]
    drop = _hit_drop(trace, hits)
    kept = [(i, s) for i, s in enumerate(trace.steps) if i not in drop]
    reads = _inserted_reads(trace, wrong, {p for _, s in kept for p in s.viewed}, params, rng)
    hint = round(len(candidate_hint(cand)) / params.chars_per_token) if cand else 0
    base = trace.steps[0].prompt_tokens + hint
    prompts, completions, extra_ctx = [], [], 0.0
    for completion, added in reads:
        prompts.append(base + extra_ctx)
        completions.append(completion)
        extra_ctx += added
    removed = np.cumsum([0] + [s.added if i in drop else 0 for i, s in enumerate(trace.steps)])
    for i, s in kept:
        prompts.append(max(s.prompt_tokens + hint - removed[i] + extra_ctx, base))
        completions.append(s.completion_tokens)
    resolved = trace.resolved
    if resolved and not hits and wrong and rng.random() < params.misleading_unresolve_prob:
        resolved = False
    info = {"n_hits": len(hits), "n_wrong": len(wrong), "steps_removed": len(drop), "reads_added": len(reads),
            "hint_tokens": hint}
    return _result(trace, cand, resolved, len(prompts), round(sum(prompts)), round(sum(completions)), info)


def _result(trace: Trace, cand: list[str] | None, resolved: bool, rounds: int, prompt: int, completion: int,
            info: dict[str, Any]) -> DownstreamResult:
    if cand is not None:
        info = {**info, "precision": info["n_hits"] / len(cand) if cand else 0.0,
                "recall": info["n_hits"] / len(set(trace.gold)) if trace.gold else 0.0}
    return DownstreamResult(instance_id=trace.instance_id, agent="replay", resolved=resolved, rounds=rounds,
                            prompt_tokens=prompt, completion_tokens=completion, candidate_files=cand,
                            repo=trace.repo, extra={"source": "model", **info})


class ReplayAgent:
    """The replay cost model as a ``DownstreamAgent`` over a fixed set of traces."""

    name = "replay"

    def __init__(self, traces: Sequence[Trace], params: ReplayParams | None = None, seed: int = 0):
        self.traces = {t.instance_id: t for t in traces}
        self.params = params or measure_params(traces)
        self.rng = np.random.default_rng(seed)

    def has(self, instance_id: str) -> bool:
        return instance_id in self.traces

    def run(self, task: Any, candidate_files: Sequence[str] | None) -> DownstreamResult:
        iid = task if isinstance(task, str) else task.instance_id
        if iid not in self.traces:
            raise ValueError(f"replay model: no recorded trajectory for instance {iid!r}")
        return replay(self.traces[iid], candidate_files, self.params, self.rng)


def validate_model(traces: Sequence[Trace]) -> dict[str, float]:
    """What can be checked without with/without-hint pairs (none exist in the recorded data).

    * ``prefix_search_share``: share of the steps before the first gold view that only searched or
      viewed (the steps a correct hint removes; the others ran or wrote code and are kept);
    * ``read_cost_loo_error``: leave-one-rollout-out relative error of the mean read cost the model
      charges for a wrong file, against the rollout's own single-file view steps;
    * ``recording_reproduced``: share of rollouts whose recorded tokens the model reproduces exactly
      when given no candidates.
    """
    prefix = [s for t in traces for s in t.steps[: t.first_target_step() or 0]]
    errors = []
    for i, t in enumerate(traces):
        own = [s.added for s in t.steps[:-1] if len(s.viewed) == 1]
        others = [s.added for j, u in enumerate(traces) if j != i for s in u.steps[:-1] if len(s.viewed) == 1]
        if own and others:
            errors.append(abs(np.mean(others) - np.mean(own)) / np.mean(own))
    params = measure_params(traces)
    same = [replay(t, None, params).tokens == t.tokens for t in traces]
    return {"prefix_steps": len(prefix),
            "prefix_search_share": float(np.mean([s.search_only for s in prefix])) if prefix else float("nan"),
            "read_cost_loo_error": float(np.median(errors)) if errors else float("nan"),
            "recording_reproduced": float(np.mean(same))}

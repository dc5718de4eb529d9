"""The episode loop: prompt -> (generate -> parse -> run tools in parallel -> observe)* -> submitted files.

``run_episodes`` advances many episodes in lock step so each turn is one batched ``policy.generate`` call
(a GRPO group, an evaluation shard); ``run_episode`` is the one-episode case. Every episode is written as a
versioned JSON record in a ``finally:`` block, so a crash mid-episode still leaves what happened.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from codegrep import TRAJECTORY_FORMAT, Policy, ToolEnvironment
from codegrep.agent.policies import estimate_tokens
from codegrep.agent.protocol import AgentConfig, apply_turn, build_messages, relevance_of, tool_argument_types


@dataclass
class Turn:
    """One model turn and what the environment answered."""

    output: str
    """The raw assistant text."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Executed calls: name, arguments, ok, error, truncated, latency_ms, bytes_out."""
    errors: list[str] = field(default_factory=list)
    """Format errors of this turn (malformed blocks, unknown tools, bad arguments, calls over the cap)."""
    prompt_tokens: int = 0
    """Prompt tokens of this generation (policy-reported, else estimated)."""
    completion_tokens: int = 0
    """Generated tokens of this turn."""
    model_s: float = 0.0
    """Wall time of the generate call this turn was part of."""
    tool_s: float = 0.0
    """Wall time of this turn's parallel tool calls."""


@dataclass
class Episode:
    """A full episode record (``codegrep.TRAJECTORY_FORMAT``); ``to_dict`` is what is saved."""

    task_text: str
    config: dict[str, Any]
    policy: dict[str, Any]
    instance_id: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Submitted files, ranked; empty when the episode never submitted."""
    submitted: bool = False
    error: str | None = None
    """The exception that ended the episode early, if any."""
    started_at: float = field(default_factory=time.time)
    total_s: float = 0.0
    format: str = TRAJECTORY_FORMAT

    @property
    def rounds(self) -> int:
        return len(self.turns)

    @property
    def tool_calls(self) -> int:
        return sum(len(t.calls) for t in self.turns)

    @property
    def format_errors(self) -> int:
        return sum(len(t.errors) for t in self.turns)

    @property
    def tokens(self) -> int:
        return sum(t.prompt_tokens + t.completion_tokens for t in self.turns)

    def timings(self) -> dict[str, float]:
        """Model, tool and remaining (parsing, formatting, bookkeeping, waiting on batch peers) seconds."""
        model = sum(t.model_s for t in self.turns)
        tool = sum(t.tool_s for t in self.turns)
        return {"total_s": self.total_s, "model_s": model, "tool_s": tool,
                "overhead_s": max(0.0, self.total_s - model - tool)}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(rounds=self.rounds, tool_calls=self.tool_calls, format_errors=self.format_errors,
                 tokens=self.tokens, timings=self.timings())
        return d

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, default=str))
        tmp.replace(path)
        return path


def load_episode(path: str | Path) -> dict[str, Any]:
    """A saved episode as a dict, refusing other formats with the file named."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != TRAJECTORY_FORMAT:
        raise ValueError(f"{path}: episode format {data.get('format')!r}, expected {TRAJECTORY_FORMAT!r}")
    return data


def _usage(policy: Policy, i: int, n: int, history: list[dict], output: str) -> tuple[int, int]:
    """(prompt, completion) tokens of batch item ``i``: policy-reported when available, else estimated."""
    usage = getattr(policy, "last_usage", None)
    if isinstance(usage, list) and len(usage) == n:
        return int(usage[i].get("prompt_tokens", 0)), int(usage[i].get("completion_tokens", 0))
    return sum(estimate_tokens(str(m.get("content", ""))) for m in history), estimate_tokens(output)


def _advance(ep: Episode, env: ToolEnvironment, turn: Turn, number: int, config: AgentConfig) -> bool:
    """Apply one generated turn to ``ep`` (``protocol.apply_turn``, shared with training); True when over."""
    ep.messages.append({"role": "assistant", "content": turn.output})
    ep.turns.append(turn)
    outcome = apply_turn(turn.output, number, config, env.run_turn, ep.task_text, relevance_of(env))
    turn.errors = outcome.errors
    turn.tool_s = outcome.tool_s
    if outcome.submit is not None:
        ep.files, ep.submitted = outcome.submit, True
    if outcome.done:
        return True
    turn.calls = [{"name": c.name, "arguments": c.arguments, **{k: getattr(r, k) for k in
                   ("ok", "error", "truncated", "latency_ms", "bytes_out")}}
                  for c, r in zip(outcome.calls, outcome.results)]
    ep.messages.append({"role": "user", "content": outcome.observation})
    return False


def _new_episode(text: str, policy: Policy, config: AgentConfig, instance_id: str | None) -> Episode:
    return Episode(task_text=text, config=config.to_dict(), policy=policy.describe(), instance_id=instance_id,
                   messages=build_messages(text, config))


def _run(episodes: list[Episode], envs: Sequence[ToolEnvironment], policy: Policy, config: AgentConfig) -> None:
    """Advance all episodes turn by turn; records an exception on the unfinished ones and re-raises it."""
    tool_argument_types()  # load the tool schemas once, outside the timed region
    start, active = time.perf_counter(), list(range(len(episodes)))
    try:
        for number in range(1, config.max_turns + 1):
            if not active:
                break
            histories = [episodes[i].messages for i in active]  # the same list objects, turn after turn
            t0 = time.perf_counter()
            outputs = policy.generate(histories)
            model_s = time.perf_counter() - t0
            still = []
            for j, i in enumerate(active):
                prompt, completion = _usage(policy, j, len(active), histories[j], outputs[j])
                turn = Turn(output=outputs[j], prompt_tokens=prompt, completion_tokens=completion, model_s=model_s)
                if _advance(episodes[i], envs[i], turn, number, config):
                    episodes[i].total_s = time.perf_counter() - start
                else:
                    still.append(i)
            active = still
    except BaseException as exc:
        for i in active:
            episodes[i].error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        for i in active:
            episodes[i].total_s = time.perf_counter() - start


def run_episodes(items: Sequence[tuple[str, ToolEnvironment]], policy: Policy, config: AgentConfig | None = None,
                 save_dir: str | Path | None = None, ids: Sequence[str] | None = None,
                 save_to: Sequence[str | Path | None] | None = None) -> list[Episode]:
    """Run episodes in lock step, one batched generate per turn; saves ``save_dir/<id>.json`` for each, or each
    to its ``save_to`` path (None: not saved), in ``finally:`` (even when the policy raises)."""
    config = config or AgentConfig()
    ids = list(ids) if ids is not None else [f"episode-{i:05d}" for i in range(len(items))]
    episodes = [_new_episode(text, policy, config, i) for (text, _), i in zip(items, ids)]
    if save_to is None:
        save_to = [Path(save_dir) / f"{i}.json" if save_dir is not None else None for i in ids]
    try:
        _run(episodes, [env for _, env in items], policy, config)
    finally:
        for ep, path in zip(episodes, save_to):
            if path is not None:
                ep.save(path)
    return episodes


def run_episode(task_text: str, env: ToolEnvironment, policy: Policy, config: AgentConfig | None = None,
                save_to: str | Path | None = None, instance_id: str | None = None) -> Episode:
    """One episode; ``save_to`` is the JSON path written in ``finally:`` (even when the policy raises)."""
    config = config or AgentConfig()
    episode = _new_episode(task_text, policy, config, instance_id)
    try:
        _run([episode], [env], policy, config)
    finally:
        if save_to is not None:
            episode.save(save_to)
    return episode

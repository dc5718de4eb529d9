"""Demonstrations: a trajectory's own searches and views replayed as a retrieval-agent episode in the
project's tool schema (``codegrep.agent.protocol``), ending with ``submit`` of the target files."""
from __future__ import annotations

import json
import math
from typing import Any

from codegrep.agent.protocol import AgentConfig, build_messages, format_observation, turn_note
from codegrep.env.tools import ToolCall, ToolResult
from codegrep.mining.events import Event, event_call
from codegrep.mining.records import SupervisionRecord, created_files

PLACEHOLDER = "[observation not recorded: mined without a repository; pass --repos to replay the calls]"


def exploration_calls(events: list[Event], record: SupervisionRecord, limit: int) -> list[ToolCall]:
    """Distinct calls from the events before the first write to a target, at most ``limit``;
    the first read of each target is always kept."""
    targets, created = set(record.target_files), created_files(events)
    kept: dict[str, tuple[int, ToolCall, bool]] = {}
    for i, e in enumerate(events):
        if e.kind in ("edit", "create") and e.path in targets:
            break
        call = event_call(e) if e.path not in created else None
        if call is not None:
            kept.setdefault((call.name, tuple(sorted(call.arguments.items()))),
                            (i, call, call.name == "read" and e.path in targets))
    items = list(kept.values())
    must = [x for x in items if x[2] and not any(y[2] and y[1].arguments["path"] == x[1].arguments["path"]
                                                 and y[0] < x[0] for y in items)]
    rest = [x for x in items if x not in must][: max(0, limit - len(must))]
    return [call for _, call, _ in sorted(must[:limit] + rest, key=lambda x: x[0])]


def split_turns(calls: list[ToolCall], targets: set[str], max_turns: int, per_turn: int) -> list[list[ToolCall]]:
    """Consecutive chunks, at most ``max_turns`` of at most ``per_turn``; a single chunk is split before the
    first target read so the episode shows searching, then reading.

    >>> c = [ToolCall("grep", {"pattern": "x"}), ToolCall("read", {"path": "a.py"})]
    >>> [[x.name for x in t] for t in split_turns(c, {"a.py"}, 3, 8)]
    [['grep'], ['read']]
    """
    if not calls:
        return []
    k = min(max_turns, math.ceil(len(calls) / per_turn))
    if k == 1 and max_turns > 1:
        first = next((i for i, c in enumerate(calls) if c.name == "read" and c.arguments["path"] in targets), 0)
        return [calls[:first], calls[first:]] if first else [calls]
    size = math.ceil(len(calls) / k)
    return [calls[i:i + size] for i in range(0, len(calls), size)]


def demonstration(record: SupervisionRecord, events: list[Event], problem_statement: str,
                  env: Any = None, config: AgentConfig | None = None) -> dict[str, Any]:
    """Chat messages of the episode (``env``: a ToolEnvironment at the base commit for real observations)."""
    config = config or AgentConfig()
    explore_turns = max(1, config.max_turns - 1)
    calls = exploration_calls(events, record, explore_turns * config.max_calls_per_turn)
    turns = split_turns(calls, set(record.target_files), explore_turns, config.max_calls_per_turn)
    messages = build_messages(problem_statement, config)
    for t, turn in enumerate(turns):
        results = env.run_turn(turn) if env is not None else [ToolResult(c.name, True, PLACEHOLDER) for c in turn]
        messages.append({"role": "assistant", "content": "\n".join(_render(c.name, c.arguments) for c in turn)})
        messages.append({"role": "user", "content": format_observation(
            results, turn, max_tokens=config.max_observation_tokens, note=turn_note(t + 2, config.max_turns))})
    files = record.target_files[: config.max_submit_files]
    messages.append({"role": "assistant", "content": _render("submit", {"files": files})})
    return {"instance_id": record.instance_id, "trajectory_id": record.trajectory_id,
            "source_format": record.source_format, "target_files": files, "n_calls": len(calls),
            "observations": "repository" if env is not None else "placeholder", "messages": messages}


def _render(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"

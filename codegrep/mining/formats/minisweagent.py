"""mini-swe-agent (``trajectory_format: mini-swe-agent-1``): bash-only turns, diff in ``info.submission``."""
from __future__ import annotations

import re
from typing import Any

from codegrep.mining.formats.base import Trajectory, content_text, issue_text, resolution_from_report
from codegrep.mining.shell import parse_shell

NAME = "mini-swe-agent"
_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.S)  # mini-swe-agent's own action regex


def detect(row: dict[str, Any]) -> bool:
    return str(row.get("trajectory_format", "")).startswith("mini-swe-agent") or (
        "messages" in row and isinstance(row.get("info"), dict) and "submission" in row["info"])


def _tokens(messages: list[dict[str, Any]]) -> int | None:
    total, seen = 0, False
    for m in messages:
        usage = (((m.get("extra") or {}).get("response") or {}).get("usage") or {}) if m.get("role") == "assistant" else {}
        if usage:
            seen = True
            total += int(usage.get("total_tokens") or (usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)))
    return total if seen else None


def parse(row: dict[str, Any], source: str = "", report: Any = None) -> Trajectory:
    """A trajectory; a turn counts as an action only when it holds exactly one bash block (as the agent ran it)."""
    messages = row.get("messages") or []
    info = row.get("info") or {}
    instance_id = str(row.get("instance_id") or info.get("instance_id") or "")
    events, step = [], 0
    for m in messages:
        if m.get("role") != "assistant":
            continue
        blocks = _ACTION.findall(content_text(m.get("content")))
        if len(blocks) != 1:
            continue  # format error: mini-swe-agent executed nothing this turn
        events += parse_shell(blocks[0], step, "/testbed")
        step += 1
    first_user = next((content_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    model = ((info.get("config") or {}).get("model") or {}).get("model_name")
    return Trajectory(trajectory_id=instance_id, instance_id=instance_id, source_format=NAME, events=events,
                      patch=str(info.get("submission") or ""), resolved=resolution_from_report(report, instance_id),
                      problem_statement=issue_text(first_user), n_steps=step, n_tokens=_tokens(messages),
                      model=model, source=source)

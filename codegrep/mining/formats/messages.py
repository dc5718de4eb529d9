"""Chat-message trajectories: SWE-Gym OpenHands-Sampled (OpenAI ``tool_calls``) and SWE-smith
(``<function=...>`` XML in the assistant text, or ``tool_calls``)."""
from __future__ import annotations

from typing import Any

from codegrep.mining.events import Event
from codegrep.mining.formats.base import UPLOADED, Trajectory, content_text, issue_text, strip_run_suffix
from codegrep.mining.formats.tools import call_arguments, tool_events, xml_calls
from codegrep.mining.shell import ShellParser

SWE_GYM, SWE_SMITH = "swe-gym-openhands", "swe-smith"


def detect_swe_gym(row: dict[str, Any]) -> bool:
    return isinstance(row.get("messages"), list) and ("run_id" in row or "test_result" in row)


def detect_swe_smith(row: dict[str, Any]) -> bool:
    return isinstance(row.get("messages"), list) and ("traj_id" in row or "patch" in row or "resolved" in row)


def _calls(message: dict[str, Any]) -> list[tuple[str, dict[str, Any], str | None]]:
    """(name, arguments, tool_call_id) of one assistant message, whichever way it encodes its calls: OpenAI
    ``tool_calls``, Anthropic ``tool_use`` content blocks, or ``<function=...>`` XML in the text.

    >>> _calls({"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, {"type": "tool_use",
    ...  "id": "tu_1", "name": "Read", "input": {"file_path": "/testbed/a.py"}}]})
    [('Read', {'file_path': '/testbed/a.py'}, 'tu_1')]
    """
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        out.append((str(fn.get("name") or ""), call_arguments(fn.get("arguments")), call.get("id")))
    content = message.get("content")
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "tool_use":
            out.append((str(part.get("name") or ""), call_arguments(part.get("input")), part.get("id")))
    if not out:
        out = [(name, params, None) for name, params in xml_calls(content_text(message.get("content")))]
    return out


def message_events(messages: list[dict[str, Any]]) -> tuple[list[Event], int, str, str | None]:
    """(events, assistant turns that acted, first user prompt, repository root) of a message list."""
    observations = {m.get("tool_call_id"): content_text(m.get("content"))
                    for m in messages if m.get("role") == "tool" and m.get("tool_call_id")}
    observations.update(_tool_results(messages))
    first_user = next((content_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    m = UPLOADED.search(first_user)
    root = m.group(1) if m and m.group(1).startswith("/") else None
    events, step, shell = [], 0, ShellParser(root, persistent=True)  # one bash session per run
    for i, msg in enumerate(messages):
        if msg.get("role") != "assistant":
            continue
        calls = _calls(msg)
        if not calls:
            continue
        for name, args, call_id in calls:
            obs = observations.get(call_id)
            if obs is None and i + 1 < len(messages) and messages[i + 1].get("role") in ("user", "tool"):
                obs = content_text(messages[i + 1].get("content"))
            events += tool_events(name, args, step, root, obs, shell)
        step += 1
    return events, step, first_user, root


def _tool_results(messages: list[dict[str, Any]]) -> dict[Any, str]:
    """{tool_use_id: text} of Anthropic ``tool_result`` blocks; an ``is_error`` result reads ``ERROR:`` first (as
    OpenHands writes a failed call's answer: ``tools.failed``).

    >>> _tool_results([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "is_error": True,
    ...  "content": [{"type": "text", "text": "File does not exist."}]}]}])
    {'tu_1': 'ERROR:\\nFile does not exist.'}
    """
    out = {}
    for m in messages:
        content = m.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_result" and part.get("tool_use_id"):
                text = content_text(part.get("content"))
                out[part["tool_use_id"]] = "ERROR:\n" + text if part.get("is_error") is True else text
    return out


def _parse(row: dict[str, Any], name: str, patch: str, source: str) -> Trajectory:
    events, steps, first_user, _ = message_events(row.get("messages") or [])
    raw_id = str(row.get("id") or row.get("traj_id") or row.get("instance_id") or "")
    raw_id += f"@{row['run_id']}" if row.get("run_id") else ""
    instance_id = strip_run_suffix(str(row.get("instance_id") or raw_id))
    resolved = row.get("resolved")
    if not isinstance(resolved, bool):
        resolved = ((row.get("test_result") or {}).get("report") or {}).get("resolved")
    return Trajectory(trajectory_id=raw_id, instance_id=instance_id, source_format=name, events=events,
                      patch=patch, resolved=resolved if isinstance(resolved, bool) else None,
                      problem_statement=issue_text(first_user), n_steps=steps,
                      model=row.get("model") or row.get("run_id"), source=source)


def parse_swe_gym(row: dict[str, Any], source: str = "", report: Any = None) -> Trajectory:
    return _parse(row, SWE_GYM, str((row.get("test_result") or {}).get("git_patch") or ""), source)


def parse_swe_smith(row: dict[str, Any], source: str = "", report: Any = None) -> Trajectory:
    return _parse(row, SWE_SMITH, str(row.get("patch") or ""), source)

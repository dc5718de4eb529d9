"""One-line reasons for an agent's submitted files, read off its episode: the greps and reads that led there.

An observation is a user message of ``<tool_response>`` blocks, each starting with the call's one-line
description (``grep pattern="x"``, ``read path="a.py" start_line=1``) followed by the tool output.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_BLOCK = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)
_READ_PATH = re.compile(r'\bpath="([^"]+)"')


def tool_blocks(messages: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """``(call description, output lines)`` for every tool response of an episode, in order.

    >>> tool_blocks([{"role": "user", "content": '<tool_response>\\ngrep pattern="f"\\na.py:3:def f()\\n</tool_response>'}])
    [('grep pattern="f"', ['a.py:3:def f()'])]
    """
    blocks = []
    for message in messages:
        if message.get("role") not in ("user", "tool"):
            continue
        for body in _BLOCK.findall(str(message.get("content") or "")):
            head, _, rest = body.partition("\n")
            blocks.append((head.strip(), rest.splitlines()))
    return blocks


def file_evidence(head: str, lines: list[str], path: str) -> str | None:
    """How one tool response points at ``path``: grep hits, a glob match, or a read of it (else None).

    >>> file_evidence('grep pattern="f"', ["a.py:3:def f()", "a.py:9:f()", "b.py:1:f"], "a.py")
    'grep pattern="f" (2 hits)'
    >>> file_evidence('read path="a.py" start_line=10 end_line=40', ["10: x"], "a.py")
    'read path="a.py" start_line=10 end_line=40'
    >>> file_evidence('glob pattern="*.py"', ["b.py"], "a.py") is None
    True
    """
    name = head.split(" ", 1)[0]
    if name == "read":
        match = _READ_PATH.search(head)
        return head if match and match.group(1).lstrip("./") == path else None
    if name == "grep":
        hits = sum(line.startswith(f"{path}:") for line in lines)
        return f"{head} ({hits} hit{'s' if hits != 1 else ''})" if hits else None
    if name == "glob":
        return head if path in (line.strip() for line in lines) else None
    return None


def episode_reasons(messages: list[dict[str, Any]], files: list[str], max_chars: int = 200) -> dict[str, str]:
    """``{file: "grep ... (n hits); read ..."}`` for each submitted file the episode's tool calls touched.

    >>> msgs = [{"role": "user", "content": '<tool_response>\\ngrep pattern="f"\\na.py:3:def f()\\n</tool_response>'}]
    >>> episode_reasons(msgs, ["a.py", "c.py"])
    {'a.py': 'grep pattern="f" (1 hit)', 'c.py': 'submitted without a tool call pointing at it'}
    """
    blocks = tool_blocks(messages)
    out = {}
    for path in files:
        found = [e for head, lines in blocks if (e := file_evidence(head, lines, path))]
        line = "; ".join(dict.fromkeys(found)) or "submitted without a tool call pointing at it"
        out[path] = line if len(line) <= max_chars else line[:max_chars - 3] + "..."
    return out


def reasons_from_episode_file(path: str | Path | None, files: list[str]) -> dict[str, str] | None:
    """Reasons from a saved episode JSON, or None when there is no readable episode."""
    if not path or not Path(path).is_file():
        return None
    try:
        messages = json.loads(Path(path).read_text()).get("messages") or []
    except (OSError, ValueError):
        return None
    return episode_reasons(messages, files)

"""What every format parser returns, and the small text helpers they share."""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from codegrep.mining.events import Event

_SWEBENCH_ID = re.compile(r"^([\w.-]+__[\w.-]+-\d+)_\d+$")
_PR = re.compile(r"<pr_description>\s*(?:Consider the following PR description:\s*)?(.*?)</pr_description>", re.S)
_ISSUE = re.compile(r"ISSUE:\s*\n(.*?)(?:\n\s*INSTRUCTIONS:|\Z)", re.S)
UPLOADED = re.compile(r"<uploaded_files>\s*(\S+)\s*</uploaded_files>")  # the checkout, as OpenHands' prompt names it


@dataclass
class Trajectory:
    """One agent run, reduced to what mining needs."""

    trajectory_id: str
    """Id of this run (the row's own id; equals ``instance_id`` when the format has none)."""
    instance_id: str
    """The task it solved (SWE-bench style id, run suffixes such as ``_3`` removed)."""
    source_format: str
    """Name of the parser that read it (see ``codegrep.mining.formats.FORMATS``)."""
    events: list[Event] = field(default_factory=list)
    """Normalised file events, in order."""
    patch: str = ""
    """The final diff the run submitted (empty when the row has none)."""
    resolved: bool | None = None
    """Whether the SWE-bench harness accepted the patch; None when unknown."""
    problem_statement: str = ""
    """Issue text as the agent saw it."""
    n_steps: int = 0
    """Agent actions (model turns that issued at least one command or tool call)."""
    n_tokens: int | None = None
    """Prompt + completion tokens over all model calls, when the format records usage."""
    model: str | None = None
    """Model or run name, when recorded."""
    source: str = ""
    """``file:line`` (or ``file``) the row came from."""


_EXIT = re.compile(r"<returncode>(-?\d+)</returncode>|\[(?:Command finished|The command completed) with exit code "
                   r"(-?\d+)\.?\]")


def exit_code_in(text: str | None) -> int | None:
    """The exit status an observation's text records: mini-swe-agent's ``<returncode>N</returncode>``, OpenHands'
    ``[Command finished with exit code N]`` / ``[The command completed with exit code N.]``; None when it records
    none (SWE-agent), or -1 (OpenHands: still running, timed out).

    >>> exit_code_in("<returncode>1</returncode>\\n<output>x</output>")
    1
    >>> exit_code_in("x\\n[Command finished with exit code 0]")
    0
    >>> exit_code_in("x\\n[The command completed with exit code -1.]"), exit_code_in("no status"), exit_code_in(None)
    (None, None, None)
    """
    m = _EXIT.search(text) if text else None
    code = int(m.group(1) or m.group(2)) if m else None
    return None if code is None or code < 0 else code


def strip_run_suffix(raw_id: str) -> str:
    """``python__mypy-15976_0`` -> ``python__mypy-15976`` (run-index suffixes of resampled datasets).

    >>> strip_run_suffix("python__mypy-15976_0"), strip_run_suffix("django__django-11433")
    ('python__mypy-15976', 'django__django-11433')
    """
    m = _SWEBENCH_ID.match(raw_id)
    return m.group(1) if m else raw_id


def issue_text(prompt: str) -> str:
    """The issue inside an agent's first user prompt (``<pr_description>`` or SWE-agent ``ISSUE:``).

    >>> issue_text("<pr_description>\\nConsider the following PR description:\\nFix x\\n</pr_description>")
    'Fix x'
    >>> issue_text("We're solving this issue. ISSUE:\\nBad y\\n\\nINSTRUCTIONS:\\nNow...")
    'Bad y'
    """
    for rx in (_PR, _ISSUE):
        m = rx.search(prompt or "")
        if m:
            return m.group(1).strip()
    return (prompt or "").strip()


def loose_mapping(value: Any) -> dict[str, Any]:
    """A dict from a dict, a JSON string or a Python-repr string (SWE-agent's ``model_stats``).

    >>> loose_mapping("{'tokens_sent': 3}"), loose_mapping(None)
    ({'tokens_sent': 3}, {})
    """
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            try:
                out = ast.literal_eval(value)
                return out if isinstance(out, dict) else {}
            except (ValueError, SyntaxError):
                return {}
    return {}


def content_text(content: Any) -> str:
    """Message content as text (OpenAI list-of-parts content joined).

    >>> content_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    'a\\nb'
    """
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)

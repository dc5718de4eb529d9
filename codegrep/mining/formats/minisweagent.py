"""THE reader of mini-swe-agent trajectories (``.traj.json``); every other module uses this one.

Two message shapes exist, both read here:

- **1.x** (``trajectory_format: mini-swe-agent-1``): the command is a fenced block inside the assistant
  text (the agent's ``action_regex``, ``bash`` by default); a turn with zero or several blocks is a format
  error and runs nothing; the observation is the next ``user`` message; usage is in
  ``extra.response.usage`` of the assistant message.
- **2.x** (``trajectory_format: mini-swe-agent-1.1``): the commands are ``extra.actions`` (tool calls,
  ``tool_calls[].function.arguments.command``, or the text-based model's regex actions); observations are
  the following ``tool`` (or ``user``) messages; usage is in ``extra.response.usage`` and the price in
  ``extra.cost``. A format error stores no assistant message: the billed call sits in the ``user`` error
  message (``extra.interrupt_type == "FormatError"``) and counts as a model call with no command.

``read(row)`` gives a :class:`Run` (steps, commands, observations, usage); ``parse(row)`` the mining
:class:`~codegrep.mining.formats.base.Trajectory`; ``load(path)`` opens a (gzipped) file.

>>> run = read({"trajectory_format": "mini-swe-agent-1", "instance_id": "a__b-1", "messages": [
...     {"role": "system", "content": "s"}, {"role": "user", "content": "<pr_description>Fix</pr_description>"},
...     {"role": "assistant", "content": "T\\n```bash\\ncat a.py\\n```", "extra": {"response": {"usage":
...         {"prompt_tokens": 10, "completion_tokens": 3}}}},
...     {"role": "user", "content": "<output>x</output>"}],
...     "info": {"submission": "", "model_stats": {"api_calls": 1, "instance_cost": 0.5}}})
>>> [s.commands for s in run.steps], run.rounds, run.prompt_tokens, run.completion_tokens, run.cost
([['cat a.py']], 1, 10, 3, 0.5)
>>> run.steps[0].observation, run.problem_statement, run.version
('<output>x</output>', 'Fix', 1)
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from codegrep.data.swebench_report import resolved as report_resolved
from codegrep.mining.events import Event
from codegrep.mining.formats.base import Trajectory, content_text, issue_text
from codegrep.mining.shell import ShellParser

NAME = "mini-swe-agent"
ACTION_REGEX = r"```bash\s*\n(.*?)\n```"  # mini-swe-agent 1.x's default action regex
_ACTION = re.compile(ACTION_REGEX, re.S)
DEFAULT_ROOT = "/testbed"  # the SWE-bench container's checkout


@dataclass
class Step:
    """One model call of a run, with what it executed and what came back."""

    index: int
    """0-based index among the run's model calls (format errors included)."""
    message: int
    """Index in ``messages`` of the call's message (the assistant message; for a 2.x format error, the error)."""
    thought: str
    """The model's text (empty for a 2.x format error, whose text was not kept)."""
    commands: list[str] = field(default_factory=list)
    """Shell commands the agent executed for this call (empty: format error, nothing ran)."""
    observations: list[str] = field(default_factory=list)
    """Text of the messages that answered this call (one per command; the error text on a format error)."""
    prompt_tokens: int | None = None
    """Prompt tokens of the call (``usage.prompt_tokens``); None when not recorded."""
    completion_tokens: int | None = None
    """Completion tokens of the call; None when not recorded."""
    cost: float | None = None
    """Price of the call in dollars (2.x ``extra.cost`` or the provider's ``usage.cost``); None when absent."""
    format_error: bool = False
    """The call produced no runnable command (zero or several blocks in 1.x, a FormatError in 2.x)."""

    @property
    def observation(self) -> str:
        """All observations of the call joined by newlines."""
        return "\n".join(self.observations)

    @property
    def has_usage(self) -> bool:
        return self.prompt_tokens is not None or self.completion_tokens is not None


@dataclass
class Run:
    """A mini-swe-agent run reduced to its calls and bookkeeping."""

    instance_id: str
    """``instance_id`` of the file (top level, else ``info.instance_id``); may be empty."""
    trajectory_format: str
    """The file's ``trajectory_format`` (``mini-swe-agent-1`` for 1.x, ``mini-swe-agent-1.1`` for 2.x)."""
    version: int
    """1 (commands in the text) or 2 (``extra.actions`` / tool calls)."""
    steps: list[Step]
    """Every model call in order."""
    system: str = ""
    """The system prompt."""
    task: str = ""
    """The first user message (the instance template with the issue)."""
    submission: str = ""
    """The final diff (``info.submission``)."""
    exit_status: str | None = None
    """``info.exit_status`` (``Submitted``, ``LimitsExceeded``, ...)."""
    model_name: str | None = None
    """``info.config.model.model_name``."""
    recorded_calls: int | None = None
    """``info.model_stats.api_calls`` as the agent counted them."""
    recorded_cost: float | None = None
    """``info.model_stats.instance_cost`` in dollars."""
    root: str = DEFAULT_ROOT
    """Directory the commands ran in (``info.config.environment.cwd``, else ``/testbed``)."""
    mini_version: str | None = None
    """``info.mini_version``."""

    @property
    def problem_statement(self) -> str:
        """The issue inside the task prompt (``<pr_description>``), else the whole prompt."""
        return issue_text(self.task)

    @property
    def actions(self) -> list[Step]:
        """Calls that executed at least one command."""
        return [s for s in self.steps if s.commands]

    @property
    def rounds(self) -> int:
        """Model calls: the recorded ``api_calls`` when present, else the calls found in the messages."""
        return self.recorded_calls if self.recorded_calls else len(self.steps)

    @property
    def usage(self) -> list[tuple[int, int]]:
        """(prompt, completion) tokens of every call that recorded usage, in order."""
        return [(s.prompt_tokens or 0, s.completion_tokens or 0) for s in self.steps if s.has_usage]

    @property
    def usage_partial(self) -> bool:
        """Some model calls recorded their token usage and others did not (of ``rounds``, or of the calls in the
        messages): their sum would undercount the run, so its token totals are unknown."""
        return 0 < len(self.usage) < max(self.rounds, len(self.steps))

    @property
    def _complete_usage(self) -> list[tuple[int, int]]:
        return [] if self.usage_partial else self.usage

    @property
    def prompt_tokens(self) -> int | None:
        """Prompt tokens over all calls; None when no call, or only some, recorded usage (unknown)."""
        u = self._complete_usage
        return sum(p for p, _ in u) if u else None

    @property
    def completion_tokens(self) -> int | None:
        u = self._complete_usage
        return sum(c for _, c in u) if u else None

    @property
    def tokens(self) -> int | None:
        """Prompt + completion tokens over all calls; None when no call, or only some, recorded usage."""
        u = self._complete_usage
        return sum(p + c for p, c in u) if u else None

    @property
    def cost(self) -> float | None:
        """Dollars: ``info.model_stats.instance_cost`` when recorded, else the sum of per-call costs."""
        if self.recorded_cost is not None:
            return self.recorded_cost
        costs = [s.cost for s in self.steps if s.cost is not None]
        return sum(costs) if costs else None

    def events(self) -> list[Event]:
        """File events of the executed commands (``step`` = index among acting calls, as in ``parse``), each read
        with its observation (its output and ``<returncode>``) when the call has one per command."""
        out: list[Event] = []
        parse = ShellParser(self.root)
        for i, s in enumerate(self.actions):
            outputs = s.observations if len(s.observations) == len(s.commands) else [None] * len(s.commands)
            for c, o in zip(s.commands, outputs):
                out += parse(c, i, output=o)
        return out


def detect(row: dict[str, Any]) -> bool:
    return str(row.get("trajectory_format", "")).startswith("mini-swe-agent") or (
        "messages" in row and isinstance(row.get("info"), dict) and "submission" in row["info"])


@lru_cache(maxsize=32)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.S)


def _usage(extra: dict[str, Any]) -> tuple[int | None, int | None, float | None]:
    resp = extra.get("response")
    usage = resp.get("usage") if isinstance(resp, dict) else None
    cost = extra.get("cost")
    if not isinstance(usage, dict) or not usage:
        return None, None, float(cost) if isinstance(cost, (int, float)) else None
    if not isinstance(cost, (int, float)):
        cost = usage.get("cost") if isinstance(usage.get("cost"), (int, float)) else None
    prompt = usage["prompt_tokens"] if "prompt_tokens" in usage else usage.get("input_tokens")
    completion = usage["completion_tokens"] if "completion_tokens" in usage else usage.get("output_tokens")
    if prompt is None and completion is None and usage.get("total_tokens") is not None:
        prompt, completion = usage["total_tokens"], 0
    return (int(prompt or 0), int(completion or 0), float(cost) if cost is not None else None)


def _tool_call_commands(message: dict[str, Any]) -> list[str] | None:
    """Commands of OpenAI ``tool_calls`` (None when the message has none)."""
    calls = message.get("tool_calls")
    if not calls:
        return None
    out = []
    for call in calls:
        fn = (call or {}).get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return []  # the agent rejects the whole call: nothing ran
        if not isinstance(args, dict) or "command" not in args:
            return []
        out.append(str(args["command"]))
    return out


def _bash_blocks(text: str) -> list[str]:
    r"""``_ACTION.findall(text)`` (``` ```bash\s*\n(.*?)\n``` ```, re.S) with ``str.find``, up to the first two
    blocks (a turn with two or more ran nothing, so their number does not matter): the regex's lazy
    ``.*?`` steps through every character of a long block (heredoc bodies), ``find`` does not. Exact: the
    greedy ``\s*\n`` tries the run's newlines last to first, each with the first ``\n``` `` after it.

    >>> _bash_blocks("a\n```bash\nls\n```\nb ```bash \n\n```"), _bash_blocks("```bash\n```")
    (['ls', ''], [])
    """
    out: list[str] = []
    i = text.find("```bash")
    n = len(text)
    while i != -1 and len(out) < 2:
        k = i + 7
        while k < n and text[k].isspace():
            k += 1
        q, end = k - 1, -1
        while q >= i + 7:
            if text[q] == "\n":
                e = text.find("\n```", q + 1)
                if e != -1:
                    out.append(text[q + 1:e])
                    end = e + 4
                    break
            q -= 1
        i = text.find("```bash", end if end != -1 else i + 1)
    return out


def _commands(message: dict[str, Any], text: str, regex: re.Pattern[str]) -> tuple[list[str], int]:
    """(commands, version) of an assistant message: ``extra.actions`` (2.x), tool calls (2.x), else the
    one fenced block of the text (1.x; zero or several blocks -> nothing ran)."""
    extra = message.get("extra") or {}
    actions = extra.get("actions") if isinstance(extra, dict) else None
    if isinstance(actions, list):
        return [str(a.get("command", "")) for a in actions if isinstance(a, dict)], 2
    calls = _tool_call_commands(message) if "tool_calls" in message else None
    if calls is not None:
        return calls, 2
    if regex is _ACTION:
        blocks = [b.strip() for b in _bash_blocks(text)] if "`" in text else []
    else:
        blocks = [b.strip() for b in regex.findall(text)]
    return (blocks if len(blocks) == 1 else []), 1


def _role(message: dict[str, Any]) -> str | None:
    """The chat role; 2.x Responses-API items have none: a ``response`` object is the model's call and a
    ``function_call_output`` its observation."""
    role = message.get("role")
    if role:
        return role
    if message.get("object") == "response":
        return "assistant"
    if message.get("type") == "function_call_output":
        return "tool"
    return None


def _text(message: dict[str, Any]) -> str:
    """Text of a message: ``content``, a Responses-API observation's ``output``, or a response's text items."""
    if message.get("content") is not None:
        return content_text(message["content"])
    out = message.get("output")
    if isinstance(out, str):
        return out
    if isinstance(out, list):  # a Responses-API response: its message items' text parts
        return "\n".join(content_text([p for p in (item.get("content") or []) if isinstance(p, dict)])
                         for item in out if isinstance(item, dict) and item.get("type") == "message")
    return ""


def _action_regex(info: dict[str, Any]) -> re.Pattern[str]:
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    for part in ("agent", "model"):
        sec = config.get(part) if isinstance(config.get(part), dict) else {}
        if isinstance(sec.get("action_regex"), str) and sec["action_regex"]:
            try:
                return _regex(sec["action_regex"])
            except re.error:
                break
    return _ACTION


def read(row: dict[str, Any], source: str = "") -> Run:
    """A :class:`Run` from a parsed ``.traj.json`` mapping (raises ValueError naming ``source`` on a
    wrong shape: not a mapping, or ``messages`` not a list of mappings)."""
    if not isinstance(row, dict):
        raise ValueError(f"{source}: a mini-swe-agent trajectory is a JSON object, not {type(row).__name__}")
    messages = row.get("messages")
    if messages is None:
        messages = []
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError(f"{source}: 'messages' must be a list of objects")
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    regex = _action_regex(info)
    steps: list[Step] = []
    version = 2 if str(row.get("trajectory_format", "")) not in ("", "mini-swe-agent-1") else 1
    system = task = ""
    current: Step | None = None
    for i, m in enumerate(messages):
        role = m.get("role") or _role(m)
        extra = m.get("extra")
        if not isinstance(extra, dict):
            extra = {}
        content = m.get("content")
        text = content if type(content) is str else _text(m)
        if role == "assistant":
            commands, shape = _commands(m, text, regex)
            version = max(version, shape)
            p, c, cost = _usage(extra)
            current = Step(len(steps), i, text, commands, [], p, c, cost, format_error=not commands)
            steps.append(current)
        elif role == "system" and not system:
            system = text
        elif role in ("user", "tool"):
            if extra.get("interrupt_type") == "FormatError" and (current is None or current.observations
                                                                 or "response" in extra):
                p, c, cost = _usage(extra)  # 2.x: the billed call that failed to parse
                current = Step(len(steps), i, "", [], [text], p, c, cost, format_error=True)
                steps.append(current)
            elif current is None:
                if role == "user" and not task:
                    task = text
            else:
                current.observations.append(text)
        elif role == "exit":
            current = None
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    calls, cost = stats.get("api_calls"), stats.get("instance_cost")
    env = config.get("environment") if isinstance(config.get("environment"), dict) else {}
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    return Run(instance_id=str(row.get("instance_id") or info.get("instance_id") or ""),
               trajectory_format=str(row.get("trajectory_format") or ""), version=version, steps=steps,
               system=system, task=task, submission=str(info.get("submission") or ""),
               exit_status=info.get("exit_status"), model_name=model.get("model_name"),
               recorded_calls=int(calls) if isinstance(calls, (int, float)) else None,
               recorded_cost=float(cost) if isinstance(cost, (int, float)) else None,
               root=str(env.get("cwd") or DEFAULT_ROOT), mini_version=info.get("mini_version"))


def load(path: str | Path) -> dict[str, Any]:
    """The mapping of a ``.traj.json`` or ``.traj.json.gz`` file (``orjson`` when installed)."""
    from codegrep.mining.inputs import read_json

    return read_json(path)


def parse(row: dict[str, Any], source: str = "", report: Any = None) -> Trajectory:
    """The mining trajectory: events of executed commands; ``n_steps`` = calls that executed a command."""
    run = read(row, source)
    return Trajectory(trajectory_id=run.instance_id, instance_id=run.instance_id, source_format=NAME,
                      events=run.events(), patch=run.submission,
                      resolved=report_resolved(report, run.instance_id),
                      problem_statement=run.problem_statement, n_steps=len(run.actions), n_tokens=run.tokens,
                      model=run.model_name, source=source)

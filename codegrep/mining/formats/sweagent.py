"""SWE-agent: ``.traj`` files (``trajectory[{action, observation, state}]``, ``info.submission``) and
nebius/SWE-agent-trajectories rows (``trajectory[{role: system|user|ai, text}]``, ``target``)."""
from __future__ import annotations

import re
import shlex
from typing import Any

from codegrep.mining.events import SANDBOX_ROOT, Event, repo_path
from codegrep.mining.formats.base import (Trajectory, content_text, issue_text, loose_mapping,
                                          strip_run_suffix)
from codegrep.mining.formats.tools import editor_events, failed
from codegrep.mining.shell import ShellParser

TRAJ, NEBIUS = "swe-agent", "nebius-swe-agent"
_CODE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_CWD = re.compile(r"\(Current directory: (/[^)]*)\)")
_WINDOW = 100  # lines SWE-agent's file viewer shows
_EDITS = ("edit", "insert", "append")  # the viewer's commands that change the open file


def detect_traj(row: dict[str, Any]) -> bool:
    traj = row.get("trajectory")
    return isinstance(traj, list) and bool(traj) and isinstance(traj[0], dict) and "action" in traj[0]


def detect_nebius(row: dict[str, Any]) -> bool:
    traj = row.get("trajectory")
    return isinstance(traj, list) and bool(traj) and isinstance(traj[0], dict) and "role" in traj[0] and (
        "text" in traj[0] or "system_prompt" in traj[0])


class _Viewer:
    """SWE-agent's stateful file viewer: ``open``, ``goto``, ``scroll_*`` and ``edit`` act on the open file;
    commands run in one shell session, so relative paths are taken from its working directory (``shell.cwd``)."""

    def __init__(self, root: str | None):
        self.root, self.open_file, self.shell = root, None, ShellParser(root, persistent=True)

    def command(self, action: str, step: int, output: str | None = None) -> list[Event]:
        """Events of one SWE-agent action (its ACI commands, else a bash command line, read with its ``output``:
        SWE-agent records no exit status).

        >>> v = _Viewer("/OQuPy")
        >>> [(e.kind, e.path, e.lines) for e in v.command("open oqupy/pt.py 536", 0) + v.command("edit 536:536\\nx\\nend_of_edit", 1)]
        [('view', 'oqupy/pt.py', (486, 585)), ('edit', 'oqupy/pt.py', None)]
        >>> [(e.kind, e.path) for e in v.command("cd oqupy", 2) + v.command("open pt.py", 3) + v.command("find_file x.py .", 4)]
        [('view', 'oqupy/pt.py'), ('find', 'oqupy')]
        >>> [(e.path, e.lines) for e in v.command("str_replace_editor view /OQuPy/oqupy/pt.py  --view_range 10 40", 5)]
        [('oqupy/pt.py', (10, 40))]
        >>> v.command("open oqupy/gone.py", 6, "File oqupy/gone.py not found"), v.open_file
        ([], 'oqupy/pt.py')
        >>> v.command("edit 5:5\\n  x\\nend_of_edit", 7, "Your proposed edit has introduced new syntax error(s).")
        []
        """
        first = action.strip().split("\n", 1)[0]
        try:
            words = shlex.split(first)
        except ValueError:
            words = first.split()
        if not words:
            return []
        cmd, args = words[0], words[1:]
        path = self.shell.path
        if (cmd == "open" and args or cmd in _EDITS) and failed(output):  # File x not found: nothing opened (the
            return []  # open file stays); an edit the linter rejected (``tools.failed``): nothing written
        if cmd == "open" and args:
            self.open_file = path(args[0])
            line = int(args[1]) if len(args) > 1 and args[1].isdigit() else None
            lines = (1, _WINDOW) if line is None else (max(1, line - _WINDOW // 2), max(1, line - _WINDOW // 2) + _WINDOW - 1)
            return [Event("view", step, self.open_file, lines=lines)] if self.open_file is not None else []
        if cmd in ("goto", "scroll_up", "scroll_down") and self.open_file:
            return [Event("view", step, self.open_file)]
        if cmd == "create" and args:
            self.open_file = path(args[0])
            return [Event("create", step, self.open_file)] if self.open_file is not None else []
        if cmd in _EDITS and self.open_file:
            return [Event("edit", step, self.open_file)]
        if cmd == "search_file" and args:
            scope = path(args[1]) if len(args) > 1 else self.open_file
            return [Event("search", step, scope, pattern=args[0])]
        if cmd == "search_dir" and args:
            return [Event("search", step, path(args[1]) if len(args) > 1 else self.shell.cwd, pattern=args[0])]
        if cmd == "find_file" and args:
            return [Event("find", step, path(args[1]) if len(args) > 1 else self.shell.cwd, pattern=args[0])]
        if cmd == "filemap" and args:
            return editor_events({"command": "view", "path": args[0]}, step, self.root)
        if cmd == "str_replace_editor" and args:
            return self.editor(action, args, step, output)
        if cmd in ("submit", "exit_forfeit", "exit_cost", "exit_context", "exit_format", "exit_error"):
            return []
        return self.shell(action, step, output=output)

    def editor(self, action: str, args: list[str], step: int, output: str | None = None) -> list[Event]:
        """``str_replace_editor COMMAND PATH [--view_range A B] [--file_text T] ...``: the options may span lines
        (a created file's text), so the whole action is split; a created file's text is remembered (a script the
        run may run).

        >>> v = _Viewer("/testbed")
        >>> [(e.kind, e.path) for e in v.command("str_replace_editor create /testbed/fix.py --file_text 'p = \\"pkg/a.py\\"\\n"
        ...  "open(p, \\"a\\").write(\\"x\\")\\n'", 0) + v.command("python fix.py", 1)]
        [('create', 'fix.py'), ('run', None), ('edit', 'pkg/a.py')]
        """
        try:
            words = shlex.split(action)[1:]
        except ValueError:
            words = args
        sub: dict[str, Any] = {"command": words[0], "path": words[1] if len(words) > 1 else ""}
        for option, key, n in (("--view_range", "view_range", 2), ("--file_text", "file_text", 1)):
            if option in words[2:-n]:
                at = words.index(option)
                sub[key] = words[at + 1:at + 1 + n] if n > 1 else words[at + 1]
        events = editor_events(sub, step, self.root, output)
        if events and events[0].kind in ("create", "edit"):
            self.shell.wrote(sub["path"], sub.get("file_text") if events[0].kind == "create" else None)
        return events


def traj_usage(info: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a ``.traj``'s ``info.model_stats`` (``tokens_sent``, ``tokens_received``,
    summed by SWE-agent over every call); None when it records none (SWE-agent writes 0 for a model that reports
    no usage) or not as numbers.

    >>> traj_usage({"model_stats": {"tokens_sent": 120, "tokens_received": 9, "api_calls": 2}})
    (120, 9)
    >>> traj_usage({"model_stats": "{'tokens_sent': 0, 'tokens_received': 0}"}), traj_usage(None)
    (None, None)
    """
    stats = loose_mapping(info.get("model_stats")) if isinstance(info, dict) else {}
    try:
        sent, received = int(stats.get("tokens_sent") or 0), int(stats.get("tokens_received") or 0)
    except (TypeError, ValueError):
        return None
    return (sent, received) if sent or received else None


def _issue_turn(history: list[dict[str, Any]]) -> str:
    """The user turn that states the issue (demonstrations come earlier in SWE-agent histories)."""
    users = [content_text(h.get("content")) for h in history if h.get("role") == "user"]
    stated = [u for u in users if "ISSUE:" in u or "<pr_description>" in u]
    return stated[-1] if stated else users[0] if users else ""


def _traj_root(history: list[dict[str, Any]], states: list[dict[str, Any]]) -> str | None:
    """The repository root: the directory the issue prompt says the agent starts in, else the shallowest working
    directory of the recorded states (each is the directory AFTER an action, so the first may be a ``cd``'s).

    >>> _traj_root([{"role": "user", "content": "ISSUE:\\nx\\n(Current directory: /moto)"}], [{"working_dir": "/moto/a"}])
    '/moto'
    >>> _traj_root([], [{"working_dir": "/moto/moto"}, {"working_dir": "/moto"}, {}])
    '/moto'
    >>> _traj_root([], [{"working_dir": "/tmp"}, {"working_dir": "/moto"}, {"working_dir": "/moto/moto"}])
    '/moto'
    """
    m = _CWD.search(_issue_turn(history))
    if m:
        return m.group(1)
    dirs = [s["working_dir"].rstrip("/") or "/" for s in states if isinstance(s.get("working_dir"), str) and s["working_dir"]]
    if not dirs:
        return None
    sandbox = [d for d in dirs if SANDBOX_ROOT.match(d)]
    if sandbox:
        return sandbox[0]
    # the directory most states are in or under (a visit to /tmp is not the checkout), the shallowest on a tie
    return max(dict.fromkeys(dirs), key=lambda d: (sum(x == d or x.startswith(d + "/") for x in dirs), -len(d)))


def parse_traj(row: dict[str, Any], source: str = "", report: Any = None) -> Trajectory:
    from codegrep.data.swebench_report import resolved as report_resolved

    steps = row.get("trajectory") or []
    states = [loose_mapping(s.get("state")) for s in steps]
    root = _traj_root(row.get("history") or [], states)
    viewer, events = _Viewer(root), []
    for i, (entry, state) in enumerate(zip(steps, states)):
        if i and states[i - 1].get("working_dir"):  # the recorded state after the previous action: where this one ran
            viewer.shell.cwd = repo_path(states[i - 1]["working_dir"], root) or ""
        if state.get("open_file") not in (None, "n/a") and str(entry.get("action", "")).lstrip().startswith(
                _EDITS):
            viewer.open_file = repo_path(state["open_file"], root)
        output = entry.get("observation")
        events += viewer.command(str(entry.get("action") or ""), i, output if isinstance(output, str) else None)
    replay = loose_mapping(row.get("replay_config"))
    stem = source.rsplit("/", 1)[-1].split(":")[0]
    for suffix in (".gz", ".traj"):  # <id>.traj, or gzipped
        stem = stem[: -len(suffix)] if stem.endswith(suffix) else stem
    instance_id = str(row.get("instance_id") or (replay.get("problem_statement") or {}).get("id") or stem)
    problem = (replay.get("problem_statement") or {}).get("text") or issue_text(_issue_turn(row.get("history") or []))
    info = row.get("info") or {}
    return Trajectory(trajectory_id=stem or instance_id, instance_id=instance_id, source_format=TRAJ, events=events,
                      patch=str(info.get("submission") or ""), resolved=report_resolved(report, instance_id),
                      problem_statement=problem, n_steps=len(steps),
                      n_tokens=sum(usage) if (usage := traj_usage(info)) else None, source=source)


def parse_nebius(row: dict[str, Any], source: str = "", report: Any = None) -> Trajectory:
    turns = row.get("trajectory") or []
    texts = [content_text(t.get("text")) for t in turns]
    cwd = next((m.group(1) for t, txt in zip(turns, texts) if t.get("role") == "user" for m in [_CWD.search(txt)] if m), None)
    viewer, events, step = _Viewer(cwd), [], 0
    for i, (t, txt) in enumerate(zip(turns, texts)):
        if t.get("role") != "ai":
            m = _CWD.search(txt) if t.get("role") == "user" else None
            if m:  # the prompt says where the next command runs
                viewer.shell.cwd = repo_path(m.group(1), cwd) or ""
            continue
        blocks = _CODE.findall(txt)
        if blocks:  # the next user turn answers the command (its output, then the prompt)
            output = texts[i + 1] if i + 1 < len(turns) and turns[i + 1].get("role") == "user" else None
            events += viewer.command(blocks[-1].strip(), step, output)
            step += 1
    raw_id = str(row.get("instance_id") or "")
    first_user = next((txt for t, txt in zip(turns, texts) if t.get("role") == "user"), "")
    resolved = row.get("target")
    return Trajectory(trajectory_id=raw_id, instance_id=strip_run_suffix(raw_id), source_format=NEBIUS,
                      events=events, patch=str(row.get("generated_patch") or ""),
                      resolved=resolved if isinstance(resolved, bool) else None,
                      problem_statement=issue_text(first_user), n_steps=step, model=row.get("model_name"),
                      source=source)

"""Tool calls of function-calling agents (OpenHands, SWE-Gym, SWE-smith, SWE-agent) -> events."""
from __future__ import annotations

import json
import re
from typing import Any

from codegrep.mining.events import Event, looks_like_file, repo_path
from codegrep.mining.shell import ShellParser

TOOLS = {
    **dict.fromkeys(("execute_bash", "bash", "run", "cmd_run", "terminal", "execute_command", "shell"), "bash"),
    **dict.fromkeys(("str_replace_editor", "str_replace_based_edit_tool", "edit_file", "file_editor", "editor"),
                    "editor"),
    # Claude Code's tools (``Read`` {file_path, offset, limit}, ``Edit``/``MultiEdit`` {file_path, ...}, ``Write``
    # {file_path, content}, ``Grep`` {pattern, path}, ``Glob`` {pattern, path}, ``LS`` {path})
    "read": "view", "edit": "edit", "multiedit": "edit", "write": "create", "grep": "search", "glob": "find",
    "ls": "list",
}
"""THE table of function-calling tools: name (any case) -> what a call does: ``bash`` (a shell command), ``editor``
(``str_replace_editor``'s commands), or the one event kind the call is."""
_FAILED = re.compile(r"\A\s*(?:OBSERVATION:\s*)?(?:ERROR\b|Error:|<tool_use_error>|Invalid `|Usage: "
                     r"|The path \S.* does not exist|File (?:\S+ )?not found|File does not exist|No such file|EISDIR"
                     r"|\[?Your proposed edit has introduced new syntax error|No replacement was performed"
                     r"|Your changes have NOT been applied|Your edit was not applied)")
_DIR_LISTING = re.compile(r"files and directories up to|is a directory|points to a directory|Directory contents", re.I)
_XML_CALL = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|\Z)", re.S)
_XML_PARAM = re.compile(r"<parameter=([\w.-]+)>\n?(.*?)\n?</parameter>", re.S)


def _looks_like_dir(path: str, observation: str | None) -> bool:
    if not path:
        return True  # the repository root
    if observation is not None:
        return bool(_DIR_LISTING.search(observation[:300]))
    return not (looks_like_file(path) or path.rpartition("/")[2].startswith("."))  # .gitignore, .flake8: files


def failed(observation: str | None) -> bool:
    """An editor's or a file tool's answer that says the call failed: nothing was shown (a missing path, a bad
    ``view_range``; OpenHands' ``ERROR:``, Claude Code's ``<tool_use_error>``, SWE-agent's ``File x not found``), or
    nothing was written (an edit the linter rejected: ``Your proposed edit has introduced new syntax error(s)``; a
    ``str_replace`` whose ``old_str`` ``did not appear verbatim``: ``No replacement was performed``).

    >>> failed("OBSERVATION:\\nERROR:\\nInvalid `path` parameter: /testbed/x.py. The path /testbed/x.py does not exist.")
    True
    >>> failed("<tool_use_error>File does not exist.</tool_use_error>"), failed("File x.py not found")
    (True, True)
    >>> failed("Here's the result of running `cat -n` on /testbed/a.py:\\n     1\tERROR = 1"), failed(None)
    (False, False)
    >>> failed("No replacement was performed, old_str `x` did not appear verbatim in /testbed/a.py.")
    True
    >>> failed("Your proposed edit has introduced new syntax error(s). Please read this error message carefully")
    True
    """
    return bool(observation) and _FAILED.match(observation) is not None


def _view_range(value: Any) -> tuple[int, int] | None:
    """``[10, 40]``, ``"[10, 40]"`` or ``["10", "40"]`` (a command line's words) -> (10, 40).

    >>> _view_range("[791, 808]"), _view_range([1, -1]), _view_range(None), _view_range(["10", "-1"])
    ((791, 808), (1, -1), None, (10, -1))
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value):
        try:
            value = [int(v) for v in value]
        except ValueError:
            return None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return max(1, value[0]), value[1]
    return None


def editor_events(args: dict[str, Any], step: int, root: str | None, observation: str | None = None) -> list[Event]:
    """``str_replace_editor`` (and OpenHands ``read``/``edit`` actions) -> one event; none for a call whose
    ``observation`` says it failed (``failed``: a view that showed nothing, an edit or a create that wrote nothing).

    >>> [(e.kind, e.path, e.lines) for e in editor_events({"command": "view", "path": "/testbed/pkg/b.py",
    ...                                                       "view_range": [3, 9]}, 0, None)]
    [('view', 'pkg/b.py', (3, 9))]
    >>> editor_events({"command": "create", "path": "/testbed/repro.py"}, 2, None)[0].kind
    'create'
    """
    raw = args.get("path") or args.get("file_path") or args.get("filename") or ""
    path = repo_path(raw, root)
    if path is None:
        return []
    command = args.get("command") or "view"
    if command == "view":
        if _looks_like_dir(path, observation):
            return [Event("list", step, path)]
        if failed(observation):  # a missing file, a bad range: nothing was read
            return []
        return [Event("view", step, path, lines=_view_range(args.get("view_range")))]
    if failed(observation):  # a rejected edit, a create over an existing file: nothing was written
        return []
    kind = "create" if command == "create" else "edit"
    return [Event(kind, step, path)]


def tool_events(name: str, args: dict[str, Any], step: int, root: str | None,
                observation: str | None = None, shell: ShellParser | None = None) -> list[Event]:
    """Events of one named tool call (``TOOLS``); unknown tools (think, finish, submit) give none. ``shell``: the
    run's persistent shell session (a ``cd`` in one call holds for the next), else a fresh shell at ``root``.

    >>> sh = ShellParser("/testbed", persistent=True)
    >>> [(e.kind, e.path) for c in ("cd pkg", "cat a.py") for e in tool_events("bash", {"command": c}, 0, None, None, sh)]
    [('view', 'pkg/a.py')]
    >>> fix = {"command": "create", "path": "/testbed/fix.py", "file_text": "open('/testbed/pkg/a.py', 'a')"}
    >>> [(e.kind, e.path) for e in tool_events("str_replace_editor", fix, 1, None, None, sh)
    ...  + tool_events("bash", {"command": "python /testbed/fix.py"}, 2, None, None, sh)]
    [('create', 'fix.py'), ('run', None), ('edit', 'pkg/a.py')]
    >>> calls = [("Read", {"file_path": "/testbed/pkg/a.py", "offset": 10, "limit": 20}), ("Grep", {"pattern": "def f",
    ...  "path": "/testbed/pkg"}), ("Glob", {"pattern": "**/*.py"}), ("MultiEdit", {"file_path": "/testbed/pkg/a.py",
    ...  "edits": []}), ("Write", {"file_path": "/testbed/pkg/new.py", "content": "x = 1"}), ("Bash", {"command": "ls"})]
    >>> [(e.kind, e.path, e.pattern, e.lines) for n, a in calls for e in tool_events(n, a, 0, "/testbed")]
    [('view', 'pkg/a.py', None, (10, 29)), ('search', 'pkg', 'def f', None), ('find', '', '**/*.py', None), ('edit', 'pkg/a.py', None, None), ('create', 'pkg/new.py', None, None), ('list', '', None, None)]
    """
    role = TOOLS.get(name.lower())
    if role == "bash":
        return (shell or ShellParser(root))(str(args.get("command") or args.get("cmd") or ""), step,
                                            output=observation)
    if role == "editor":
        events = editor_events(args, step, root, observation)
    elif role in ("view", "edit", "create"):
        events = editor_events({"command": {"view": "view", "edit": "str_replace", "create": "create"}[role],
                                "path": args.get("file_path") or args.get("path") or args.get("notebook_path"),
                                "view_range": _offset_limit(args)}, step, root, observation)
    elif role in ("search", "find", "list") and not failed(observation):
        path = repo_path(str(args.get("path") or ""), root) if args.get("path") else ""
        pattern = args.get("pattern") if role != "list" else None
        return [] if path is None else [Event(role, step, path, pattern=str(pattern) if pattern else None)]
    else:
        return []
    if shell is not None and events and events[0].kind in ("create", "edit"):  # a script the run may run later
        text = args.get("file_text", args.get("content")) if events[0].kind == "create" else None
        shell.wrote(str(args.get("path") or args.get("file_path") or ""), text if isinstance(text, str) else None)
    return events


def _offset_limit(args: dict[str, Any]) -> list[int] | None:
    """Claude Code ``Read``'s ``offset`` (the 1-based first line) and ``limit`` (how many lines) -> a ``view_range``.

    >>> _offset_limit({"offset": 10, "limit": 5}), _offset_limit({"limit": 50}), _offset_limit({"offset": 7}), _offset_limit({})
    ([10, 14], [1, 50], [7, -1], None)
    """
    offset, limit = args.get("offset"), args.get("limit")
    offset = offset if isinstance(offset, int) and not isinstance(offset, bool) and offset > 0 else None
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    if offset is None and limit is None:
        return None
    start = offset or 1
    return [start, start + limit - 1 if limit else -1]


def call_arguments(raw: Any) -> dict[str, Any]:
    """OpenAI ``function.arguments`` (a JSON string, possibly broken) as a dict.

    >>> call_arguments('{"command": "ls"}'), call_arguments("{broken"), call_arguments({"a": 1})
    ({'command': 'ls'}, {}, {'a': 1})
    """
    if isinstance(raw, dict):
        return raw
    try:
        out = json.loads(raw or "{}")
    except (ValueError, TypeError):
        return {}
    return out if isinstance(out, dict) else {}


def xml_calls(text: str) -> list[tuple[str, dict[str, str]]]:
    """``<function=NAME><parameter=K>V</parameter></function>`` blocks (SWE-smith / OpenHands non-FC).

    >>> xml_calls("x <function=bash>\\n<parameter=command>ls -la</parameter>\\n</function>")
    [('bash', {'command': 'ls -la'})]
    """
    if "<function=" not in (text or ""):
        return []
    return [(name, dict(_XML_PARAM.findall(body))) for name, body in _XML_CALL.findall(text)]

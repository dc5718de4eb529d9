"""Tool calls of function-calling agents (OpenHands, SWE-Gym, SWE-smith, SWE-agent) -> events."""
from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from codegrep.mining.events import Event, repo_path
from codegrep.mining.shell import ShellParser

_BASH_TOOLS = {"execute_bash", "bash", "run", "cmd_run", "terminal", "execute_command", "shell"}
_EDITOR_TOOLS = {"str_replace_editor", "str_replace_based_edit_tool", "edit_file", "file_editor", "editor"}
_DIR_LISTING = re.compile(r"files and directories up to|is a directory|points to a directory|Directory contents", re.I)
_XML_CALL = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|\Z)", re.S)
_XML_PARAM = re.compile(r"<parameter=([\w.-]+)>\n?(.*?)\n?</parameter>", re.S)


def _looks_like_dir(path: str, observation: str | None) -> bool:
    if not path:
        return True  # the repository root
    if observation is not None:
        return bool(_DIR_LISTING.search(observation[:300]))
    return "." not in posixpath.basename(path.rstrip("/"))


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
    """``str_replace_editor`` (and OpenHands ``read``/``edit`` actions) -> one event.

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
        return [Event("view", step, path, lines=_view_range(args.get("view_range")))]
    kind = "create" if command == "create" else "edit"
    return [Event(kind, step, path)]


def tool_events(name: str, args: dict[str, Any], step: int, root: str | None,
                observation: str | None = None, shell: ShellParser | None = None) -> list[Event]:
    """Events of one named tool call; unknown tools (think, finish, submit) give none. ``shell``: the run's
    persistent shell session (a ``cd`` in one call holds for the next), else a fresh shell at ``root``.

    >>> sh = ShellParser("/testbed", persistent=True)
    >>> [(e.kind, e.path) for c in ("cd pkg", "cat a.py") for e in tool_events("bash", {"command": c}, 0, None, None, sh)]
    [('view', 'pkg/a.py')]
    >>> fix = {"command": "create", "path": "/testbed/fix.py", "file_text": "open('/testbed/pkg/a.py', 'a')"}
    >>> [(e.kind, e.path) for e in tool_events("str_replace_editor", fix, 1, None, None, sh)
    ...  + tool_events("bash", {"command": "python /testbed/fix.py"}, 2, None, None, sh)]
    [('create', 'fix.py'), ('run', None), ('edit', 'pkg/a.py')]
    """
    if name in _BASH_TOOLS:
        return (shell or ShellParser(root))(str(args.get("command") or args.get("cmd") or ""), step,
                                            output=observation)
    if name in _EDITOR_TOOLS:
        events = editor_events(args, step, root, observation)
        if shell is not None and events and events[0].kind in ("create", "edit"):  # a script the run may run later
            text = args.get("file_text") if events[0].kind == "create" else None
            shell.wrote(str(args.get("path") or args.get("file_path") or ""), text if isinstance(text, str) else None)
        return events
    return []


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

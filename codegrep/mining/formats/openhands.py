"""OpenHands: the event stream (``action``/``observation`` dicts) and ``output.jsonl`` rows.

No real OpenHands row ships in ``../shared``; this parser follows the documented event schema
(``{"source": "agent", "action": "read", "args": {"path": ...}}``, ``edit`` with ``command``,
``run`` with a shell ``command``) and is tested on a hand-made fixture that mirrors it.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from codegrep.data.swebench_report import resolved as report_resolved
from codegrep.data.tasks import patch_files
from codegrep.mining.events import Event
from codegrep.mining.formats.base import UPLOADED, Trajectory, content_text, exit_code_in, strip_run_suffix
from codegrep.mining.formats.tools import editor_events, failed
from codegrep.mining.shell import ShellParser

NAME = "openhands"
_WORKSPACE_REPO = re.compile(r"/workspace/[\w.-]+__[\w.-]+")
_SILENT = {"message", "system", "recall", "think", "change_agent_state", "null", "finish", "delegate", "condensation"}


def flatten_history(history: Iterable[Any]) -> list[dict[str, Any]]:
    """Events from a flat event list or from old ``[[action, observation], ...]`` pairs."""
    out: list[dict[str, Any]] = []
    for item in history or []:
        if isinstance(item, (list, tuple)):
            out += [x for x in item if isinstance(x, dict)]
        elif isinstance(item, dict):
            out.append(item)
    return out


def detect(row: Any) -> bool:
    if isinstance(row, list):
        return any(isinstance(e, dict) and ("action" in e or "observation" in e) for e in flatten_history(row)[:20])
    return isinstance(row, dict) and "history" in row and (
        "test_result" in row or "instance" in row or "metrics" in row) and bool(row.get("history")) and \
        detect(row["history"])


def action_events(event: dict[str, Any], step: int, shell: ShellParser | None = None,
                  observation: dict[str, Any] | None = None) -> list[Event]:
    """Events of one OpenHands action (``shell``: the run's bash session, where a ``cd`` persists; ``observation``:
    the event that answered it, whose ``content`` and exit status a shell command is read with).

    >>> [(e.kind, e.path) for e in action_events({"action": "read", "args": {"path":
    ...     "/workspace/django__django__3.0/django/db/models.py"}}, 0)]
    [('view', 'django/db/models.py')]
    >>> action_events({"action": "read", "args": {"path": "/workspace/p/x.py"}}, 1, None, {"observation": "error",
    ...     "content": "File not found: /workspace/p/x.py. Your current working directory is /workspace/p."})
    []
    >>> action_events({"action": "edit", "args": {"path": "/workspace/p/x.py", "command": "str_replace"}}, 2, None,
    ...     {"observation": "error", "content": "ERROR:\\nNo replacement was performed, old_str `a` did not appear"})
    []
    """
    args = event.get("args") or {}
    action = event.get("action")
    root = shell.root if shell is not None else None  # the stream's checkout, as its shell commands read it
    refused = isinstance(observation, dict) and (observation.get("observation") == "error"
                                                 or failed(_output(observation)[0]))
    if action in ("read", "edit", "write") and refused:
        return []  # a missing file, a directory, a bad range: nothing was read; a rejected edit: nothing written
    if action == "read":
        return editor_events({"command": "view", "path": args.get("path"),
                              "view_range": args.get("view_range") or _start_end(args)}, step, root)
    if action in ("edit", "write"):
        command = "create" if action == "write" else args.get("command") or "edit"
        text = args.get("content") if action == "write" else args.get("file_text") if command == "create" else None
        if shell is not None:  # a script the run may run later
            shell.wrote(str(args.get("path") or ""), text if isinstance(text, str) else None)
        return editor_events({"command": command, "path": args.get("path")}, step, root)
    if action == "run":
        output, code = _output(observation)
        return (shell or ShellParser())(str(args.get("command") or ""), step, output=output, exit_code=code)
    if action == "run_ipython":
        return [Event("run", step, command=str(args.get("code") or "")[:200])]
    return []


def _output(observation: dict[str, Any] | None) -> tuple[str | None, int | None]:
    """(text, exit status) of a command's observation: ``content``, and ``extras.metadata.exit_code`` (older
    versions: ``extras.exit_code``; -1, still running or timed out, is not known), else the status its text states.

    >>> _output({"observation": "run", "content": "boom", "extras": {"metadata": {"exit_code": 1}}})
    ('boom', 1)
    >>> _output({"observation": "run", "content": "x", "extras": {"exit_code": -1}}), _output(None)
    (('x', None), (None, None))
    """
    if not isinstance(observation, dict):
        return None, None
    text = observation.get("content")
    text = text if isinstance(text, str) else None
    extras = observation.get("extras") if isinstance(observation.get("extras"), dict) else {}
    meta = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
    code = meta.get("exit_code", extras.get("exit_code"))
    if not isinstance(code, int) or isinstance(code, bool):
        return text, exit_code_in(text)
    return text, code if code >= 0 else None


def _answers(flat: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """{index of an action in ``flat``: the observation that answered it}: by ``cause`` (the action's ``id``), else
    the next observation before another action (older paired histories)."""
    index = {ev["id"]: i for i, ev in enumerate(flat) if "action" in ev and isinstance(ev.get("id"), int)}
    out: dict[int, dict[str, Any]] = {}
    pending = None
    for i, ev in enumerate(flat):
        if "action" in ev:
            pending = i
        elif "observation" in ev:
            at = index.get(ev.get("cause"), pending) if isinstance(ev.get("cause"), int) else pending
            if at is not None and at not in out:
                out[at] = ev
            pending = None
    return out


def _start_end(args: dict[str, Any]) -> list[int] | None:
    """Older ``read`` actions' ``start``/``end``: a 0-based start and an exclusive end (``lines[start:end]``;
    ``end`` -1: to the end of the file) -> the 1-based inclusive ``view_range``; None for the whole file.

    >>> _start_end({"start": 10, "end": 40}), _start_end({"start": 99, "end": -1}), _start_end({"start": 0, "end": -1})
    ([11, 40], [100, -1], None)
    """
    start, end = args.get("start", 0), args.get("end", -1)
    if not (isinstance(start, int) and isinstance(end, int)) or (start <= 0 and end == -1):
        return None
    return [max(0, start) + 1, end]


def _root(first_user: str, stream: list[dict[str, Any]], changed: Iterable[str] = ()) -> str | None:
    """The checkout: ``<uploaded_files>`` of the task prompt, else the first ``/workspace/<owner>__<repo>...``
    directory a path or command names (OpenHands' layout), else the directory under which the stream names a file
    of the run's final diff (``changed``: a repository mounted at ``/workspace`` itself, OpenHands' default for a
    user's own project, writes ``/workspace/src/app.py`` for the diff's ``src/app.py``); None when none says it.

    >>> _root("", [{"action": "run", "args": {"command": "cd /workspace/django__django__3.0 && ls"}}])
    '/workspace/django__django__3.0'
    >>> _root("<uploaded_files>\\n/workspace/proj\\n</uploaded_files>", []), _root("", [{"args": {"path": "/workspace/x.py"}}])
    ('/workspace/proj', None)
    >>> _root("", [{"args": {"path": "/workspace/src/app/core.py"}}], ["src/app/core.py"])
    '/workspace'
    >>> _root("", [{"args": {"command": "cat /workspace/myrepo/src/app/core.py"}}], ["src/app/core.py", "core.py"])
    '/workspace/myrepo'
    """
    m = UPLOADED.search(first_user)
    if m and m.group(1).startswith("/"):
        return m.group(1).rstrip("/")
    found = next((m.group(0) for text in _stream_texts(stream) for m in [_WORKSPACE_REPO.search(text)] if m), None)
    if found is not None:
        return found
    files = sorted((f for f in changed if f and not f.startswith("/")), key=lambda f: -f.count("/"))
    if not files:
        return None
    # the longest (most specific) file first: an absolute path that ends in it names the checkout before it
    anchor = re.compile(r"(?<![^\s'\"=(:])(/[^\s'\"]*?)/(" + "|".join(map(re.escape, files)) + r")(?![\w./-])")
    texts = list(_stream_texts(stream))
    for f in files:
        for text in texts:
            for m in anchor.finditer(text):
                if m.group(2) == f:
                    return m.group(1)
    return None


def events_from_stream(stream: Iterable[Any], changed: Iterable[str] = ()) -> tuple[list[Event], int, str]:
    """(events, number of agent actions, first user message) of an event stream (``changed``: the files of the run's
    final diff, which place the checkout when nothing else does: ``_root``)."""
    flat = flatten_history(stream)
    first_user = next((content_text((ev.get("args") or {}).get("content") or ev.get("message")) for ev in flat
                       if ev.get("source") == "user" and ev.get("action") == "message"), "")
    events, step, shell = [], 0, ShellParser(_root(first_user, flat, changed), persistent=True)
    answers = _answers(flat)
    for i, ev in enumerate(flat):
        if "action" not in ev:
            continue
        if ev.get("source", "agent") != "agent" or ev.get("action") in _SILENT:
            continue
        events += action_events(ev, step, shell, answers.get(i))
        step += 1
    return events, step, first_user


def _stream_texts(stream: Iterable[Any]) -> Iterable[str]:
    """Paths, working directories and commands of an event stream, in order (where workspace paths appear)."""
    for ev in flatten_history(stream):
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        for key in ("path", "cwd", "command", "working_dir"):
            if isinstance(args.get(key), str):
                yield args[key]
        extras = ev.get("extras") if isinstance(ev.get("extras"), dict) else {}
        for key in ("path", "cwd", "command"):
            if isinstance(extras.get(key), str):
                yield extras[key]


def token_usage(metrics: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a row's ``metrics``: ``accumulated_token_usage``, else the sum of the per-call
    ``token_usages``; None when it records no usage (older versions keep only ``accumulated_cost``, error rows have
    no metrics) or records it in no readable form (a count that is not a number, an entry that is not an object).

    >>> token_usage({"accumulated_token_usage": {"prompt_tokens": 5, "completion_tokens": 2}})
    (5, 2)
    >>> token_usage({"token_usages": [{"prompt_tokens": 3}, {"prompt_tokens": 4, "completion_tokens": 1}]})
    (7, 1)
    >>> token_usage({"accumulated_cost": 0.5}), token_usage({"token_usages": [None]}), token_usage(None)
    (None, None, None)
    """
    if not isinstance(metrics, dict):
        return None
    acc = metrics.get("accumulated_token_usage")
    parts = [acc] if isinstance(acc, dict) and acc else metrics.get("token_usages")
    if not isinstance(parts, list) or not parts or not all(isinstance(u, dict) for u in parts):
        return None
    try:
        return (sum(int(u.get("prompt_tokens") or 0) for u in parts),
                sum(int(u.get("completion_tokens") or 0) for u in parts))
    except (TypeError, ValueError):
        return None


def parse(row: Any, source: str = "", report: Any = None) -> Trajectory:
    """An ``output.jsonl`` row, or a bare event list (then ids come from the file name via ``source``)."""
    if isinstance(row, list):
        row = {"history": row}
    instance = row.get("instance") or {}
    result = row.get("test_result") or {}
    patch = str(result.get("git_patch") or row.get("git_patch") or "")
    events, steps, first_user = events_from_stream(row.get("history") or [], patch_files(patch.replace("\r\n", "\n")))
    raw_id = str(row.get("instance_id") or instance.get("instance_id") or "")
    if not raw_id:  # a bare event stream: the id written in its content, else its file name without suffixes
        from codegrep.mining.ids import id_from_name, id_in_text, id_in_values

        raw_id = id_in_values(_stream_texts(row.get("history") or [])) or id_in_text(first_user) or \
            id_from_name(source)
    instance_id = strip_run_suffix(raw_id)
    own = result.get("report") or row.get("report")
    if isinstance(own, dict) and own.get("error_eval"):  # eval_infer's evaluation itself failed: its resolved
        own = None  # False is its default, not a verdict (not evaluated)
    resolved = report_resolved(own or report, instance_id)
    if resolved is None and isinstance(row.get("resolved"), bool):
        resolved = row["resolved"]
    return Trajectory(trajectory_id=raw_id, instance_id=instance_id, source_format=NAME, events=events,
                      patch=patch, resolved=resolved,
                      problem_statement=str(instance.get("problem_statement") or first_user),
                      n_steps=steps, n_tokens=sum(usage) if (usage := token_usage(row.get("metrics"))) else None,
                      model=(row.get("metadata") or {}).get("llm_config", {}).get("model")
                      if isinstance(row.get("metadata"), dict) else None, source=source)

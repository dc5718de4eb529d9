"""Instance ids of trajectories that do not carry one: from their content, their file name, or their issue text.

SWE-bench ids look like ``owner__name-NUMBER`` (``astropy__astropy-12907``). A run that stores no id of its
own (an OpenHands event stream saved as ``<instance_id>.events.json``, a bare ``.traj`` file) gets one, in
this order: an id written in its content (a workspace path such as ``/workspace/astropy__astropy-12907/``,
or the first user message), else its file name with the known suffixes stripped, else — when tasks are
given — the task whose issue text its first message quotes.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from codegrep.mining.formats.base import strip_run_suffix

KNOWN_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".json", ".jsonl", ".traj", ".events", ".event_stream",
                  ".history", ".trajectory", ".output", ".log", ".pred", ".messages")
"""File-name endings that are never part of an id (removed repeatedly, in any order)."""
_ID = re.compile(r"(?<![\w.-])([A-Za-z0-9][\w.-]*?__[A-Za-z0-9][\w.-]*?-\d+(?:_\d+)?)(?![\w-])")
_WORKSPACE = re.compile(r"/workspace/([^/\s'\"<>]+)")
_SPACE = re.compile(r"\s+")
_KEY_CHARS = 120  # characters of an issue's start that identify it


def is_instance_id(text: str) -> bool:
    """A SWE-bench-shaped id.

    >>> is_instance_id("astropy__astropy-12907"), is_instance_id("astropy__astropy__5.0"), is_instance_id("x")
    (True, False, False)
    """
    m = _ID.fullmatch(text or "")
    return bool(m)


def id_from_name(name: str) -> str:
    """The id in a file name or ``file:line`` source: directories, ``:line``/``[i]`` and known suffixes removed.

    >>> id_from_name("runs/astropy__astropy-12907.events.json"), id_from_name("/x/django__django-11433.traj.json.gz")
    ('astropy__astropy-12907', 'django__django-11433')
    >>> id_from_name("out/python__mypy-15976_0.json:3"), id_from_name("notes.json")
    ('python__mypy-15976', 'notes')
    """
    base = (name or "").rsplit("/", 1)[-1]
    base = re.sub(r"(:\d+|\[\d+\])$", "", base)
    changed = True
    while changed:
        changed = False
        for suffix in KNOWN_SUFFIXES:
            if base.lower().endswith(suffix) and len(base) > len(suffix):
                base, changed = base[: -len(suffix)], True
    return strip_run_suffix(base)


def id_in_text(text: str) -> str | None:
    """The first SWE-bench id in a text (a workspace path's folder first).

    >>> id_in_text("cd /workspace/astropy__astropy-12907/ && ls"), id_in_text("<uploaded_files>/workspace/astropy__astropy__5.0")
    ('astropy__astropy-12907', None)
    >>> id_in_text("Fix django__django-11433 please")
    'django__django-11433'
    """
    if not text:
        return None
    for folder in _WORKSPACE.findall(text):
        if is_instance_id(folder):
            return folder
    m = _ID.search(text)
    return strip_run_suffix(m.group(1)) if m else None


def id_in_values(values: Iterable[Any], limit: int = 200) -> str | None:
    """The first id found in the first ``limit`` strings of ``values`` (paths, commands, messages)."""
    for i, v in enumerate(values):
        if i >= limit:
            break
        found = id_in_text(v) if isinstance(v, str) else None
        if found:
            return found
    return None


def _key(text: str) -> str:
    return _SPACE.sub(" ", text or "").strip()[:_KEY_CHARS]


class IssueIndex:
    """Tasks by the start of their issue text: finds the task whose issue a prompt quotes.

    >>> idx = IssueIndex({"a__b-1": "Crash when the widget spins twice in a row and then stops abruptly"})
    >>> idx.find("<uploaded_files>/workspace/a__b__1.0</uploaded_files> I've uploaded a repo. "
    ...          "Crash when the widget  spins twice in a row and then stops abruptly. Fix it.")
    'a__b-1'
    """

    MIN_CHARS = 40  # shorter issue starts are too generic to identify a task

    def __init__(self, statements: dict[str, str]):
        self.keys = {k: iid for iid, text in statements.items() if len(k := _key(text)) >= self.MIN_CHARS}

    def find(self, prompt: str) -> str | None:
        text = _SPACE.sub(" ", prompt or "")
        hits = {iid for key, iid in self.keys.items() if key in text}
        return hits.pop() if len(hits) == 1 else None

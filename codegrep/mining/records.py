"""Trajectory -> one supervision record (the definitions of target and context files live here)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from typing import Any

from codegrep.data.tasks import Task, patch_files
from codegrep.mining.events import Event, glob_split, in_repo
from codegrep.mining.formats.base import Trajectory
from codegrep.mining.targets import classify, is_artifact, new_files

_WRITES = ("edit", "create")
_FILE_KINDS = ("view", "search", "edit", "create", "delete")  # events naming a file (search: its scope)
_REPO_FROM_ID = re.compile(r"^([\w.-]+?)__([\w.-]+?)(?:-\d+)?$")  # owner__name[-number]
_SWE_SMITH_SUFFIX = re.compile(r"\.[0-9a-f]{8}(?:\..*)?$")  # owner__name.<commit8>[.<bug>]


@dataclass
class SupervisionRecord:
    """What one trajectory says about the files an issue needed."""

    instance_id: str
    """Task id (run suffixes removed)."""
    repo: str
    """``owner/name``: from the task when ``tasks`` are given, else guessed from the instance id."""
    base_commit: str | None
    """Commit of the task (only known from ``tasks``)."""
    source_format: str
    """Parser that read the trajectory."""
    resolved: bool | None
    """SWE-bench verdict on the run's patch (None: unknown)."""
    patch_files: list[str]
    """Files the final diff touches (``patch_source`` says whether a diff was there or actions stood in)."""
    edited_files: list[str]
    """Files the agent wrote (edit/create actions), first-write order, scratch included."""
    viewed_files: list[str]
    """Repository files the agent viewed, first-view order (its own new files and outside paths excluded)."""
    search_patterns: list[str]
    """Distinct search patterns, in order."""
    target_files: list[str]
    """``patch_files`` minus tests, build/CI config, artifacts and scratch files (see ``targets.classify``)."""
    context_files: list[str]
    """Files viewed before the first write to a target file, that are not targets (repository files only)."""
    n_steps: int
    """Agent actions."""
    n_tokens: int | None
    """Prompt + completion tokens, when the format records usage."""
    steps_to_first_target_view: int | None
    """1-based index of the first step that viewed a target file (None: never viewed one)."""
    trajectory_id: str = ""
    """The run's own id."""
    gold_files: list[str] | None = None
    """The task's gold files (only with ``tasks``), carried beside ``target_files``, never substituted."""
    patch_source: str = "patch"
    """``patch``: from the final diff; ``actions``: no usable diff (missing, or touching no file the run
    ever accessed), so the files the agent wrote and did not delete stand in."""
    excluded_files: dict[str, str] = field(default_factory=dict)
    """Changed files left out of ``target_files`` and why (test, build, artifact, scratch)."""
    n_views: int = 0
    """View events on repository files (each re-read counts)."""
    n_target_views: int = 0
    """View events on target files."""
    model: str | None = None
    """Model or run name."""
    source: str = ""
    """``file:line`` of the row."""

    @property
    def useful(self) -> bool:
        """Fit to supervise a retriever: resolved, with at least one target file, and at least one agent action (a
        run of zero steps shows no exploration to learn from: its patch came from nothing the run did)."""
        return bool(self.resolved) and bool(self.target_files) and self.n_steps > 0

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in _FIELD_NAMES}  # shallow: asdict's deep copies cost more than mining
        d["useful"] = self.useful
        d["wasted_read_share"] = (self.n_views - self.n_target_views) / self.n_views if self.n_views else None
        return d


_FIELD_NAMES = [f.name for f in fields(SupervisionRecord)]


def repo_from_instance_id(instance_id: str) -> str:
    """``django__django-11433`` -> ``django/django``; SWE-smith ``arrow-py__arrow.1d70d009.x`` -> ``arrow-py/arrow``.

    >>> repo_from_instance_id("django__django-11433"), repo_from_instance_id("arrow-py__arrow.1d70d009.lm__x")
    ('django/django', 'arrow-py/arrow')
    >>> repo_from_instance_id("scikit-learn__scikit-learn-13124")
    'scikit-learn/scikit-learn'
    >>> repo_from_instance_id("vercel__next.js-12345"), repo_from_instance_id("getmoto__moto.694ce1f4.pr_6055")
    ('vercel/next.js', 'getmoto/moto')
    """
    m = _REPO_FROM_ID.match(_SWE_SMITH_SUFFIX.sub("", instance_id))
    return f"{m.group(1)}/{m.group(2)}" if m else ""


def _leading(path: str) -> list[str]:
    """Every leading part of a path: the directories it lies in, and itself.

    >>> _leading("pkg/sub/a.py")
    ['pkg', 'pkg/sub', 'pkg/sub/a.py']
    """
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _ordered(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(p for p in paths if in_repo(p)))


def _matches(path: str, glob: str) -> bool:
    """The shell's wildcard match: ``*`` stops at ``/``.

    >>> _matches("repro_a.py", "repro_*.py"), _matches("pkg/sub/a.py", "pkg/*.py"), _matches("pkg/a.py", "pkg/*.py")
    (True, False, True)
    """
    return path.count("/") == glob.count("/") and fnmatchcase(path, glob)


def _final_writes(events: list[Event]) -> list[str]:
    """Files written and not deleted or reverted afterwards (stands in for a missing diff)."""
    alive: dict[str, None] = {}
    for e in events:
        if e.kind in _WRITES and in_repo(e.path) and not glob_split(e.path):  # sed -i ... pkg/*.py: no one file
            alive[e.path] = None
        elif e.kind in ("delete", "revert") and e.path is not None:  # rm x, rm -r dir, rm repro_*.py, git checkout x
            for p in [p for p in alive if e.path in ("", p) or p.startswith(e.path + "/") or _matches(p, e.path)]:
                del alive[p]
    return list(alive)


def _foreign(changed: list[str], events: list[Event]) -> bool:
    """A diff from another run: none of its top-level directories is one this run ever accessed
    (a run that edits through a script still views or searches the package it edits)."""
    accessed = {e.path.split("/")[0] for e in events if in_repo(e.path)}
    return bool(accessed) and not {f.split("/")[0] for f in changed} & accessed


def created_files(events: list[Event], existing: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """Files the run brought into being: those whose first event is a ``create``. A create of a file the run
    had already viewed, searched, edited or deleted, or that ``existing`` names (modified, not added, by the
    final diff), overwrites a repository file (``mv a.py.new a.py``, ``cat <<EOF > a.py``): not the run's own.

    >>> ev = [Event("create", 0, "repro.py"), Event("view", 1, "pkg/a.py"), Event("create", 2, "pkg/a.py"),
    ...       Event("create", 3, "pkg/b.py"), Event("view", 4, "repro.py")]
    >>> sorted(created_files(ev)), sorted(created_files(ev, {"pkg/b.py"}))
    (['pkg/b.py', 'repro.py'], ['repro.py'])
    """
    first: dict[str, str] = {}
    for e in events:
        if e.path and e.kind in _FILE_KINDS and not glob_split(e.path):
            first.setdefault(e.path, e.kind)
    return {p for p, kind in first.items() if kind == "create" and p not in existing}


def _views(events: list[Event], created: set[str]) -> list[Event]:
    """Views of repository files the agent did not create itself (``cat pkg/*.py`` names no one file)."""
    return [e for e in events if e.kind == "view" and in_repo(e.path) and e.path not in created
            and not is_artifact(e.path) and not glob_split(e.path)]


def supervision_record(traj: Trajectory, task: Task | None = None) -> SupervisionRecord:
    """The record of one trajectory; ``task`` adds repo, base commit and gold files."""
    events = traj.events
    patch = (traj.patch or "").replace("\r\n", "\n")
    changed, source = patch_files(patch), "patch"
    if not changed or _foreign(changed, events):
        changed, source = _final_writes(events), "actions"  # no diff, or a diff from another run
    added = new_files(patch) if source == "patch" else set()
    created = created_files(events, {f for f in changed if f not in added} if source == "patch" else frozenset())
    fresh = added if source == "patch" else created
    known = frozenset(part for e in events if in_repo(e.path) and e.path not in created and e.path not in fresh
                      and e.kind != "create" for part in _leading(e.path)) \
        | {part for f in changed if f not in fresh for part in _leading(f)}
    labels = {f: classify(f, f in fresh, f in created, known) for f in changed}
    targets = [f for f in changed if labels[f] == "target"]
    views, target_set = _views(events, created), set(targets)
    first_write = next((e.step for e in events if e.kind in _WRITES and e.path in target_set), None)
    if first_write is None:
        first_write = next((e.step for e in events if e.kind in _WRITES and e.path not in created), 10 ** 9)
    first_view = next((e.step + 1 for e in views if e.path in target_set), None)
    return SupervisionRecord(
        instance_id=traj.instance_id, trajectory_id=traj.trajectory_id,
        repo=task.repo if task else repo_from_instance_id(traj.instance_id),
        base_commit=task.base_commit if task else None, source_format=traj.source_format, resolved=traj.resolved,
        patch_files=changed, patch_source=source,
        edited_files=_ordered([e.path for e in events if e.kind in _WRITES and not glob_split(e.path)]),
        viewed_files=_ordered([e.path for e in views]),
        search_patterns=list(dict.fromkeys(e.pattern for e in events if e.kind == "search" and e.pattern)),
        target_files=targets, excluded_files={f: lab for f, lab in labels.items() if lab != "target"},
        context_files=[f for f in _ordered([e.path for e in views if e.step < first_write]) if f not in target_set],
        n_steps=traj.n_steps, n_tokens=traj.n_tokens, steps_to_first_target_view=first_view,
        gold_files=list(task.gold_files) if task else None, n_views=len(views),
        n_target_views=sum(e.path in target_set for e in views), model=traj.model, source=traj.source)

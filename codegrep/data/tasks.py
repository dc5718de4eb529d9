"""The task schema (SWE-bench's) and gold files. Loaders live below the dataclass.

``load_tasks`` reads a local ``.jsonl`` / ``.json`` (a list) / ``.parquet`` file, a Hugging Face dataset
id (online only; ``owner/name`` or ``owner/name:split``) or ``"default"`` (the offline default set).
``profile_tasks`` is how stages get their tasks and the repository resolver from a profile.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from codegrep.errors import UserError
from codegrep.files import MAX_JSON_DEPTH, atomic_write, read_json
from codegrep.data.patches import FileChange, gold_files_from_patch, patch_changes, patch_files  # noqa: F401

if TYPE_CHECKING:
    from codegrep.data.repos import RepoResolver


def adhoc_id(repo: str | Path, commit: str, query: str) -> str:
    """The instance id of an ad-hoc query: a digest of repository, commit and query text, so the same request
    gets the same id (a retriever seeded per instance draws the same files) and another request another one.

    >>> adhoc_id("/src/proj", "HEAD", "crash") == adhoc_id("/src/proj", "HEAD", "crash") != adhoc_id("/src/proj", "HEAD", "bug")
    True
    >>> adhoc_id("/src/proj", "WORKTREE", "fix the parser")
    'adhoc-59f5985fc12a'
    """
    return "adhoc-" + hashlib.sha1(f"{repo}\0{commit}\0{query}".encode()).hexdigest()[:12]


@dataclass
class Task:
    """One localisation problem: an issue text, a repository at a commit, and the files a fix touches."""

    instance_id: str
    """Unique id, SWE-bench style (``owner__name-1234``)."""
    repo: str
    """Source repository as ``owner/name``."""
    base_commit: str
    """Commit the issue is posed against (full SHA)."""
    problem_statement: str
    """The issue text the retriever sees."""
    patch: str = ""
    """The reference fix as a unified git diff (may be empty when ``gold_files`` is given)."""
    gold_files: list[str] = field(default_factory=list)
    """Files the fix touches that exist at ``base_commit``; from ``patch`` when not given (see gold_files_from_patch)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Every other field of the source row, kept as it came."""

    def __post_init__(self) -> None:
        if not self.gold_files and self.patch:
            self.gold_files = gold_files_from_patch(self.patch)

    def to_dict(self) -> dict[str, Any]:
        row = {"instance_id": self.instance_id, "repo": self.repo, "base_commit": self.base_commit,
               "problem_statement": self.problem_statement, "patch": self.patch,
               "gold_files": list(self.gold_files)}
        row.update(self.extra)
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "Task":
        known = {"instance_id", "repo", "base_commit", "problem_statement", "patch", "gold_files"}
        _check_row_shape(row)
        missing = [k for k in ("instance_id", "repo", "base_commit", "problem_statement") if not row.get(k)]
        if missing:
            raise UserError("missing field " + ", ".join(repr(k) for k in missing))
        if not row.get("patch") and not row.get("gold_files"):
            raise UserError(f"task {row['instance_id']!r} has neither 'patch' nor 'gold_files'")
        if "/" not in str(row["repo"]):
            raise UserError(f"field 'repo' must be 'owner/name', got {row['repo']!r}")
        task = cls(instance_id=str(row["instance_id"]), repo=str(row["repo"]),
                   base_commit=str(row["base_commit"]), problem_statement=str(row["problem_statement"]),
                   patch=row.get("patch") or "", gold_files=list(row.get("gold_files") or []),
                   extra={k: v for k, v in row.items() if k not in known})
        if not task.gold_files:  # a task with nothing to find would be scored silently (P@1 0 whatever is ranked)
            raise UserError(f"task {task.instance_id!r}: field 'patch' names no file (not a unified diff?) and "
                            "there is no 'gold_files'")
        return task


def _check_row_shape(row: Any) -> None:
    """Refuse a row whose fields have the wrong type (a ``UserError`` naming the field), before any use.

    Hand-written rather than a schema library: six fields, exact messages, no dependency.

    >>> _check_row_shape({"instance_id": "a__b-1", "gold_files": "src/a.py"})
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: field 'gold_files' must be a list of paths, got the string 'src/a.py' (write ["src/a.py"])
    >>> _check_row_shape({"instance_id": "a__b-1", "patch": 123})
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: field 'patch' must be a string (a unified diff), got int 123
    """
    if not isinstance(row, dict):
        raise UserError(f"row must be a JSON object, got {type(row).__name__}")
    for key in ("instance_id", "repo", "base_commit", "problem_statement"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise UserError(f"field {key!r} must be a string, got {type(row[key]).__name__} {row[key]!r:.60}")
    patch = row.get("patch")
    if patch is not None and not isinstance(patch, str):
        raise UserError(f"field 'patch' must be a string (a unified diff), got {type(patch).__name__} {patch!r:.60}")
    gold = row.get("gold_files")
    if isinstance(gold, str):
        raise UserError(f"field 'gold_files' must be a list of paths, got the string {gold!r:.200} "
                        f"(write {json.dumps([gold]) if len(gold) <= 200 else '[...]'})")
    if gold is not None and (not isinstance(gold, (list, tuple)) or not all(isinstance(g, str) and g for g in gold)):
        raise UserError(f"field 'gold_files' must be a list of non-empty path strings, got {gold!r:.100}")


# ----------------------------------------------------------------------------------------------- loaders

_HF_ID = re.compile(r"^[\w.-]+/[\w.-]+(:[\w.-]+)?$")
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass
class LoadReport:
    """What a load read and what it skipped (lenient mode): nothing is dropped silently."""

    source: str
    """The file or dataset id read."""
    n_rows: int = 0
    """Rows read from the source."""
    n_loaded: int = 0
    """Tasks kept after validation (before filters)."""
    skipped: list[str] = field(default_factory=list)
    """One ``file:line: reason`` message per skipped row."""


def task_split(task: Task) -> str | None:
    """The split a task belongs to (``extra["split"]``); ``None`` means every split."""
    split = task.extra.get("split")
    return str(split) if split else None


def _json_lines(path: Path, lines: Iterator[bytes]) -> Iterator[tuple[str, Any]]:
    """``(file:line, row)`` per non-blank line; a line that is not UTF-8 or not JSON yields a ``UserError``. A
    byte-order mark before the first row (a Windows editor saves one) is dropped, as ``files.read_text`` drops it.

    >>> [row for _, row in _json_lines(Path("t.jsonl"), [b'\\xef\\xbb\\xbf{"a": 1}', b'{"b": 2}'])]
    [{'a': 1}, {'b': 2}]
    """
    for lineno, raw in enumerate(lines, start=1):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            yield f"{path}:{lineno}", json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            yield f"{path}:{lineno}", UserError(f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)")
        except json.JSONDecodeError as exc:
            yield f"{path}:{lineno}", UserError(f"invalid JSON: {exc}")
        except RecursionError:
            yield f"{path}:{lineno}", UserError(f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)")


def _rows_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    with open(path, "rb") as fh:
        yield from _json_lines(path, fh)


def _rows_json(path: Path) -> Iterator[tuple[str, Any]]:
    data = read_json(path, "tasks file")
    if not isinstance(data, list):
        raise UserError(f"{path}: expected a JSON list of task objects, got {type(data).__name__}")
    for i, row in enumerate(data):
        yield f"{path}: item {i}", row


def _rows_parquet(path: Path) -> Iterator[tuple[str, Any]]:
    import pandas as pd

    def plain(v: Any) -> Any:  # numpy values -> Python; a missing cell (NaN) -> None
        v = v.tolist() if hasattr(v, "tolist") else v
        return None if isinstance(v, float) and v != v else v

    try:
        frame = pd.read_parquet(path)
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise UserError(f"{path}: not a readable parquet file ({exc})") from None
    for i, row in enumerate(frame.to_dict(orient="records")):
        yield f"{path}: row {i}", {k: plain(v) for k, v in row.items()}


def _network_ok(host: str = "huggingface.co", timeout: float = 3.0) -> bool:
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _rows_hf(dataset_id: str) -> Iterator[tuple[str, Any]]:
    from codegrep.data.repos import is_offline

    name, _, hf_split = dataset_id.partition(":")
    if is_offline() or not _network_ok():
        raise RuntimeError(f"cannot load Hugging Face dataset {name!r}: offline (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE "
                           f"set or huggingface.co unreachable); pass a local .jsonl/.json/.parquet file instead")
    import datasets

    for i, row in enumerate(datasets.load_dataset(name, split=hf_split or "test")):
        yield f"{name}: row {i}", dict(row)


def _rows_jsonl_gz(path: Path) -> Iterator[tuple[str, Any]]:
    import gzip
    import zlib

    try:
        with gzip.open(path, "rb") as fh:
            yield from _json_lines(path, fh)
    except (OSError, EOFError, zlib.error) as exc:  # not gzip, cut short, or damaged inside (zlib.error)
        raise UserError(f"{path}: not a readable gzip file ({exc})") from None


def _row_source(source: str | os.PathLike) -> tuple[str, Iterator[tuple[str, Any]]]:
    from codegrep.data.sources import is_shipped_source, shipped_rows

    if is_shipped_source(source):
        return str(source), ((f"{source}: row {i}", row) for i, row in enumerate(shipped_rows(str(source))))
    if str(source) == "default":
        from codegrep.data.default_set import ensure_default_task_set

        source = ensure_default_task_set().tasks_path
    path = Path(source).expanduser()
    readers = {".jsonl": _rows_jsonl, ".json": _rows_json, ".parquet": _rows_parquet}
    if path.is_file() and path.name.endswith(".jsonl.gz"):
        return str(path), _rows_jsonl_gz(path)
    if path.is_file():
        if path.suffix not in readers:
            raise ValueError(f"{path}: unsupported task file type {path.suffix!r} (use {', '.join(FILE_SUFFIXES)})")
        return str(path), readers[path.suffix](path)
    if path.is_dir() and not _HF_ID.match(str(source)):
        raise ValueError(f"{path}: is a directory, not a task file (use {', '.join(FILE_SUFFIXES)})")
    if path.suffix in readers or not _HF_ID.match(str(source)):
        raise FileNotFoundError(f"task file not found: {path}")
    return str(source), _rows_hf(str(source))


def _coerce_lists(row: Any) -> Any:
    """SWE-bench on the hub stores FAIL_TO_PASS/PASS_TO_PASS as JSON strings; keep them as lists."""
    if not isinstance(row, dict):
        return row  # Task.from_dict names the wrong shape
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "gold_files"):
        if isinstance(row.get(key), str) and row[key].startswith("["):
            try:
                row[key] = json.loads(row[key])
            except (json.JSONDecodeError, RecursionError):
                pass
    return row


def read_tasks(source: str | os.PathLike, on_error: str = "raise") -> tuple[list[Task], LoadReport]:
    """Every valid task of a source, plus a report; ``on_error="skip"`` skips bad rows (counted)."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    name, rows = _row_source(source)
    report, tasks, seen = LoadReport(name), [], {}
    for where, row in rows:
        report.n_rows += 1
        try:
            if isinstance(row, Exception):
                raise row
            task = Task.from_dict(_coerce_lists(row))
            if task.instance_id in seen:
                raise ValueError(f"duplicate instance_id {task.instance_id!r} (first at {seen[task.instance_id]})")
        except ValueError as exc:
            if on_error == "raise":
                raise UserError(f"{where}: {exc}") from None
            report.skipped.append(f"{where}: {exc}")
            continue
        seen[task.instance_id] = where
        tasks.append(task)
    report.n_loaded = len(tasks)
    if report.n_rows == 0:
        raise UserError(f"{name}: no task rows (empty, or only blank lines)")
    if not tasks:
        raise UserError(f"{name}: none of its {report.n_rows} rows is a valid task; first: {report.skipped[0]}")
    return tasks, report


def filter_tasks(tasks: Sequence[Task], *, repos: Sequence[str] | None = None,
                 instance_ids: Sequence[str] | None = None, limit: int | None = None, seed: int = 0,
                 split: str | None = None) -> list[Task]:
    """Keep tasks by repository, id and split, then a seeded sample of ``limit`` (source order kept). One
    repository or id given as a string (``--set tasks.repos=django/django``) is one, not a set of its letters."""
    repos = [repos] if isinstance(repos, str) else repos
    instance_ids = [instance_ids] if isinstance(instance_ids, str) else instance_ids
    out = list(tasks)
    if repos:
        wanted = set(repos)
        out = [t for t in out if t.repo in wanted]
    if instance_ids:
        wanted = set(instance_ids)
        missing = sorted(wanted - {t.instance_id for t in out})
        if missing:
            raise ValueError(f"instance id(s) not in the task set: {missing[:10]}{' ...' if len(missing) > 10 else ''}")
        out = [t for t in out if t.instance_id in wanted]
    if split:
        out = [t for t in out if task_split(t) in (None, split)]
    return seeded_sample(out, limit, seed)


def seeded_sample(items: Sequence[Any], n: int | None, seed: int = 0) -> list[Any]:
    """A seeded sample of ``n`` of ``items`` in their original order; all of them when ``n`` is None or not smaller.
    The one sampling rule for task limits, evaluation subsets and the ablation's screen.

    >>> seeded_sample(list("abcdef"), 3, seed=0), seeded_sample(list("ab"), None)
    (['a', 'd', 'f'], ['a', 'b'])
    """
    items = list(items)
    if n is None or len(items) <= n:
        return items
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


def load_tasks(source: str | os.PathLike, *, repos: Sequence[str] | None = None,
               instance_ids: Sequence[str] | None = None, limit: int | None = None, seed: int = 0,
               split: str | None = None, on_error: str = "raise") -> list[Task]:
    """Load and filter tasks (see ``read_tasks`` and ``filter_tasks``); skipped rows are reported on stderr."""
    tasks, report = read_tasks(source, on_error=on_error)
    if report.skipped:
        print(f"load_tasks: skipped {len(report.skipped)} of {report.n_rows} rows of {report.source}; first: "
              f"{report.skipped[0]}", file=sys.stderr)
    return filter_tasks(tasks, repos=repos, instance_ids=instance_ids, limit=limit, seed=seed, split=split)


def save_tasks(tasks: Sequence[Task], path: str | os.PathLike) -> Path:
    """Write tasks as JSONL (one ``Task.to_dict`` per line)."""
    path = Path(path)
    with atomic_write(path, "w", encoding="utf-8", newline="\n") as fh:
        for t in tasks:
            fh.write(json.dumps(t.to_dict(), ensure_ascii=False) + "\n")
    return path


def split_section(cfg: dict[str, Any], split: str | None) -> dict[str, Any]:
    """The profile's ``tasks:`` keys for one split: ``tasks.splits.<split>`` over the section's own keys.

    >>> split_section({"tasks": {"source": "default", "limit": 3, "splits": {"eval": {"source": "verified"}}}}, "eval")
    {'source': 'verified', 'limit': 3}
    """
    sec = dict(cfg.get("tasks") or {})
    sec.update((sec.pop("splits", None) or {}).get(split or "", None) or {})
    return sec


def _sources(value: Any) -> list[str]:
    """``tasks.source`` as a list (one name, or a list of names that are concatenated)."""
    if value is None or value == []:
        return ["default"]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def _source_tasks(sources: Sequence[str], on_error: str) -> tuple[list[Task], list[Path]]:
    """Every task of several sources (ids must not repeat across them) and the repos dirs they come with."""
    from codegrep.data.sources import is_shipped_source, shipped_repos_dir

    tasks: list[Task] = []
    dirs: list[Path] = []
    where: dict[str, str] = {}
    for source in sources:
        if source == "default":
            from codegrep.data.default_set import ensure_default_task_set

            built = ensure_default_task_set()
            path, dirs_of = built.tasks_path, [Path(built.repos_dir)]
        else:
            path, dirs_of = source, ([shipped_repos_dir()] if is_shipped_source(source) else [])
        loaded, report = read_tasks(path, on_error=on_error)
        if report.skipped:
            print(f"profile_tasks: skipped {len(report.skipped)} of {report.n_rows} rows of {report.source}; "
                  f"first: {report.skipped[0]}", file=sys.stderr)
        for task in loaded:
            if task.instance_id in where:
                raise ValueError(f"tasks.source: instance {task.instance_id!r} is in both {where[task.instance_id]!r} "
                                 f"and {source!r}")
            where[task.instance_id] = source
        tasks.extend(loaded)
        dirs.extend(d for d in dirs_of if d not in dirs)
    return tasks, dirs


def _pool(cfg: dict[str, Any], split: str | None) -> tuple[list[Task], dict[str, Any], list[Path]]:
    """A split's tasks before the seeded ``limit`` sample (sources, repos, ids and split filters applied)."""
    sec = split_section(cfg, split)
    tasks, dirs = _source_tasks(_sources(sec.get("source")), sec.get("on_error", "raise"))
    tasks = filter_tasks(tasks, repos=sec.get("repos"), instance_ids=sec.get("instance_ids"), split=split)
    return tasks, sec, dirs


def evaluation_instance_ids(cfg: dict[str, Any]) -> set[str]:
    """Every instance id the profile's ``eval`` split can evaluate on (its pool before any ``limit`` sample).

    ``profile_tasks(cfg, "train")`` never returns one of these; other training inputs (SFT demonstrations,
    mined trajectories) filter on it too, so no evaluation instance reaches training.
    """
    return {t.instance_id for t in _pool(cfg, "eval")[0]}


def evaluation_repos(cfg: dict[str, Any]) -> set[str]:
    """The repositories (``owner/name``) of the profile's ``eval`` split: training inputs that must stay away from
    the evaluation's code bases (first-turn demonstrations, :func:`codegrep.rl.demos.first_turn_demonstrations`)."""
    return {t.repo for t in _pool(cfg, "eval")[0]}


def whole_split_tasks(cfg: dict[str, Any], split: str = "train") -> tuple[list[Task], RepoResolver]:
    """:func:`profile_tasks` for the WHOLE ``split``, not its seeded sample (``splits.<split>.limit`` dropped): where
    the warm start's demonstrations, notebook 03's ceiling and the training-task check draw from, beside a run's
    sampled pool of GRPO prompts."""
    import copy

    whole = copy.deepcopy(cfg)
    whole.setdefault("tasks", {}).setdefault("splits", {}).setdefault(split, {})["limit"] = None
    return profile_tasks(whole, split=split, limit=None)


def profile_tasks(cfg: dict[str, Any], split: str | None = None,
                  limit: int | None = None) -> tuple[list[Task], RepoResolver]:
    """The tasks and the repository resolver a profile's ``tasks:`` section names, for one split.

    ``tasks.splits.<split>`` overrides the section's keys for that split; ``limit`` overrides both.
    ``tasks.source`` is one source or a list of sources (concatenated; the resolver searches each one's
    repositories after ``repos_dir``). The ``train`` split never holds an instance of the ``eval`` pool
    (:func:`evaluation_instance_ids`); dropped ones are reported on stderr.
    """
    from codegrep.data.repos import RepoResolver

    tasks, sec, dirs = _pool(cfg, split)
    if split == "train":
        held_out = evaluation_instance_ids(cfg)
        dropped = [t.instance_id for t in tasks if t.instance_id in held_out]
        if dropped:
            print(f"profile_tasks: {len(dropped)} train task(s) are evaluation instances and were dropped "
                  f"(first: {dropped[0]})", file=sys.stderr)
            tasks = [t for t in tasks if t.instance_id not in held_out]
    seed = sec.get("seed")
    tasks = filter_tasks(tasks, limit=limit if limit is not None else sec.get("limit"),
                         seed=int(cfg.get("seed", 0) if seed is None else seed))
    user = sec.get("repos_dir")
    repos_dirs = ([Path(user).expanduser()] if user else []) + [d for d in dirs if not user or d != Path(user)]
    return tasks, RepoResolver(repos_dir=repos_dirs or None, mirror_dir=sec.get("mirror_dir"),
                               offline=sec.get("offline"))

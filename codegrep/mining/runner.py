"""Streaming, parallel mining: work units -> worker processes -> records/demonstrations JSONL + stats.

Workers get small units (a batch of files, a byte span of a ``.jsonl``, or a batch of 16 rows) through
``Pool.imap``; they parse, build records and serialise them, so the parent only writes bytes and counts,
and memory stays flat in the number of trajectories. A row that cannot be read is counted under its
reason and listed with its ``file:line``; it never stops the run, but a run where nothing parsed is an
error (``NothingParsed``) naming the inputs and the first failures.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from codegrep.files import atomic_write, refuse_overwriting_inputs
from codegrep.mining import inputs
from codegrep.mining.formats import parse_row

_STATE: dict[str, Any] = {}
MAX_LISTED_FAILURES = 50


@dataclass
class MineOptions:
    """What workers need besides the rows."""

    fmt: str = "auto"
    """Format name, or ``auto`` to detect per row."""
    tasks: dict[str, Any] = field(default_factory=dict)
    """instance_id -> Task: adds repo, base commit and gold files."""
    repos: str | None = None
    """Directory of ``owner__name`` git repositories: checks paths and replays demonstration calls."""
    demonstrations: bool = True
    """Build a demonstration for each useful record."""
    resolved_only: bool = False
    """Write only useful records (``mine_files`` sets it from its argument)."""


class NothingParsed(ValueError):
    """No input row could be read as a trajectory (the message names the inputs and first failures)."""


def check_options(options: MineOptions) -> None:
    """Refuse settings that would make every row fail or be silently ignored (ValueError naming them)."""
    from codegrep.mining.formats import FORMATS

    if options.fmt != "auto" and options.fmt not in FORMATS:
        raise ValueError(f"unknown --format {options.fmt!r}; choose auto or one of: {', '.join(FORMATS)}")
    if options.repos is not None and not Path(options.repos).expanduser().is_dir():
        raise ValueError(f"--repos {options.repos}: not a directory (a directory of owner__name git repositories)")


def check_output(path: str | Path | None, flag: str = "--out") -> None:
    """An output path must be a writable file location, not a directory (ValueError naming ``flag``)."""
    if path is None:
        return
    p = Path(path).expanduser()
    if p.is_dir() or str(path).endswith("/"):
        raise ValueError(f"{flag} {path}: is a directory; give a file path such as {p / 'records.jsonl'}")
    if p.parent.exists() and not p.parent.is_dir():
        raise ValueError(f"{flag} {path}: its parent {p.parent} is not a directory")


def _init(options: MineOptions) -> None:
    _STATE.clear()
    _STATE["options"] = options
    _STATE["envs"] = {}


def _environment(task: Any) -> Any:
    """A checkout-free tool environment at the task's base commit (cached per worker; None if unavailable)."""
    options: MineOptions = _STATE["options"]
    key = (task.repo, task.base_commit)
    envs = _STATE["envs"]
    if key not in envs:
        from codegrep.data.repos import RepoResolver
        from codegrep.env.tools import GitObjectEnvironment

        resolver = _STATE.setdefault("resolver", RepoResolver(options.repos, offline=True))
        try:
            git_dir = resolver.resolve(task.repo, task.base_commit)
            git_dir = git_dir / ".git" if (git_dir / ".git").is_dir() else git_dir  # a non-bare clone
            envs[key] = GitObjectEnvironment(git_dir, task.base_commit)
        except (FileNotFoundError, ValueError, RuntimeError, OSError):
            envs[key] = None
        if len(envs) > 8:  # keep a few repository snapshots open per worker
            old = next(iter(envs))
            if envs[old] is not None:
                envs[old].close()
            del envs[old]
    return envs[key]


def process_row(row: Any, source: str, report: Any = None) -> tuple:
    """("ok", record dict, demonstration or None) or ("fail", reason, source, message)."""
    from codegrep.mining.demos import demonstration
    from codegrep.mining.records import supervision_record

    options: MineOptions = _STATE.get("options") or MineOptions()
    try:
        traj = parse_row(row, options.fmt, source, report)
    except ValueError as exc:
        reason = "unrecognised-format" if "unrecognised" in str(exc) else \
            "format-mismatch" if "does not match --format" in str(exc) else "bad-row"
        return ("fail", reason, source, str(exc)[:300])
    except Exception as exc:  # a malformed row of a known format: count it, keep going
        return ("fail", f"parse-error:{type(exc).__name__}", source, str(exc)[:300])
    if not traj.instance_id or (options.tasks and traj.instance_id not in options.tasks):
        _fill_instance_id(traj, source, options)
    if not traj.instance_id:
        return ("fail", "no-instance-id", source, "the row names no instance id (nor does its content or file name)")
    task = options.tasks.get(traj.instance_id)
    record = supervision_record(traj, task)
    env = _environment(task) if options.repos and task is not None else None
    out = record.to_dict()
    out["matched"] = task is not None
    if env is not None:
        checked = list(dict.fromkeys(record.viewed_files + record.target_files))
        out["paths_checked"], out["paths_exist"] = len(checked), sum(p in env.entries for p in checked)
    demo = None
    problem = traj.problem_statement or (task.problem_statement if task else "")
    if options.demonstrations and record.useful and problem.strip():  # no issue to retrieve for: no episode
        demo = demonstration(record, traj.events, problem, env)
    return ("ok", out, demo)


def _fill_instance_id(traj: Any, source: str, options: MineOptions) -> None:
    """An id for a run that has none (its file name without suffixes), or whose id is not SWE-bench-shaped
    and no task has (the task whose issue its prompt quotes). A SWE-bench-shaped id is never replaced."""
    from codegrep.mining.ids import IssueIndex, id_from_name, is_instance_id

    name, original = source.rpartition("/")[2], traj.instance_id
    if not traj.instance_id and "[" not in name and ":" not in name:  # one run per file: its name is its id
        traj.instance_id = id_from_name(source)
    if options.tasks and traj.instance_id not in options.tasks and not is_instance_id(original) \
            and traj.problem_statement:
        if "issues" not in _STATE:
            _STATE["issues"] = IssueIndex({k: getattr(t, "problem_statement", "") for k, t in options.tasks.items()})
        found = _STATE["issues"].find(traj.problem_statement)
        if found:
            traj.instance_id = found
    traj.trajectory_id = traj.trajectory_id or traj.instance_id


def _file_results(label: str) -> list[tuple]:
    """Results of one trajectory file (a run, or a JSON list of rows)."""
    try:
        data = inputs.read_json(label)
    except (ValueError, OSError, EOFError) as exc:  # truncated, not JSON, not gzip, unreadable
        return [("fail", "invalid-json", label, str(exc)[:300])]
    report = inputs.report_beside(label)
    if isinstance(data, list) and data and all(isinstance(r, dict) and not ("action" in r or "observation" in r)
                                               for r in data[:5]):
        return [process_row(r, f"{label}[{i}]", report) for i, r in enumerate(data)]
    return [process_row(data, label, report)]


def process_unit(unit: tuple) -> list[tuple]:
    """All results of one work unit (see ``inputs.iter_units``)."""
    kind, label = unit[0], unit[1]
    if kind == "files":
        return [r for f in label for r in _file_results(f)]
    if kind == "file":
        return _file_results(label)
    if kind == "span":  # ("span", path, start_byte, end_byte, first_line_number)
        return process_unit(("lines", label, unit[4], list(inputs.span_lines(label, unit[2], unit[3]))))
    start, rows = unit[2], unit[3]
    report = inputs.report_beside(label) if kind == "lines" else None
    results = []
    for i, row in enumerate(rows, start):
        source = f"{label}:{i}" if kind == "lines" else f"{label}[{i - 1}]"
        if kind == "lines":
            if not row.strip():
                continue
            try:
                row = inputs.loads(row)
            except ValueError as exc:
                results.append(("fail", "invalid-json", source, str(exc)[:300]))
                continue
        results.append(process_row(row, source, report))
    return results


def serialized_unit(unit: tuple) -> tuple["_Stats", bytes, bytes]:
    """One unit mined to bytes: (its stats, record lines, demonstration lines). The worker counts and
    serialises, so the parent only merges counters and writes (it would otherwise cost ~10% of the work)."""
    options: MineOptions = _STATE.get("options") or MineOptions()
    stats, recs, demos = _Stats(bool(options.tasks), bool(options.repos)), [], []
    for r in process_unit(unit):
        stats.add(r)
        if r[0] != "ok":
            continue
        if r[1]["useful"] or not options.resolved_only:
            recs.append(inputs.dumps_line(r[1]))
            stats.records += 1
        if r[2] is not None:
            demos.append(inputs.dumps_line(r[2]))
            stats.demonstrations += 1
    return stats, b"".join(recs), b"".join(demos)


def _results(files: list[str], options: MineOptions, workers: int, serialize: bool = False) -> Iterator[Any]:
    """Per-row results (``process_unit``), or with ``serialize`` per-unit ``serialized_unit`` triples."""
    check_options(options)
    units = inputs.iter_units(files)
    if workers <= 1:
        _init(options)
        for unit in units:
            if serialize:
                yield serialized_unit(unit)
            else:
                yield from process_unit(unit)
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(workers, initializer=_init, initargs=(options,)) as pool:
        if serialize:
            yield from pool.imap(serialized_unit, units, chunksize=1)
        else:
            for batch in pool.imap(process_unit, units, chunksize=1):
                yield from batch


def mine_files(paths: list[str], out_path: str | Path, demos_path: str | Path | None = None,
               options: MineOptions | None = None, workers: int = 1, resolved_only: bool = False,
               progress: bool = True) -> dict[str, Any]:
    """Mine ``paths`` into ``out_path`` (records JSONL) and ``demos_path``; returns the stats.

    Raises ``NothingParsed`` (a ValueError) when rows were read but none parsed, or there was nothing to read;
    the message names the inputs and the first failures, and the output files are left as they were.
    An output that is an input (or both outputs one file) is refused before anything is opened; both outputs
    are written to temporary siblings and renamed into place only when the run completes.
    """
    from tqdm.auto import tqdm

    options = options or MineOptions()
    check_options(options)
    check_output(out_path, "--out")
    check_output(demos_path, "--demonstrations")
    files = inputs.expand_inputs(paths)
    options = replace(options, resolved_only=resolved_only, demonstrations=options.demonstrations and bool(demos_path))
    refuse_overwriting_inputs({"--out": out_path, "--demonstrations": demos_path},
                              {**{str(p): p for p in paths if Path(p).is_file()},
                               **{f: f for f in files if not f.startswith("hf://")}})
    stats = _Stats(matching=bool(options.tasks), checking=bool(options.repos))
    started = time.perf_counter()
    # Both outputs go to temporary siblings renamed into place at the end: a killed or failed run leaves the
    # previous records/demonstrations whole (never a truncated file that looks complete).
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(atomic_write(out_path, "wb"))
        demo_fh = stack.enter_context(atomic_write(demos_path, "wb")) if demos_path else None
        with tqdm(unit="traj", disable=None if progress else True, desc="mining") as bar:
            for unit_stats, rec_bytes, demo_bytes in _results(files, options, workers, serialize=True):
                stats.merge(unit_stats)
                out.write(rec_bytes)
                if demo_fh:
                    demo_fh.write(demo_bytes)
                bar.update(unit_stats.read)
        summary = stats.summary(time.perf_counter() - started, workers, len(files))
        if not summary["parsed"]:  # raised before the renames: the previous outputs stay as they were
            shown = " ".join("; ".join(summary["failures"][:3]).split()) or "no trajectory files found"
            raise NothingParsed(f"0 of {summary['read']} trajectories parsed from {', '.join(map(str, paths))}: "
                                f"{shown}")
    return summary


class _Stats:
    """Counters of one mining run."""

    def __init__(self, matching: bool, checking: bool = False):
        self.checking = checking  # --repos given: count the matched records it could not check
        self.matching, self.read, self.parsed, self.records, self.demonstrations = matching, 0, 0, 0, 0
        self.failed, self.formats, self.counts = Counter(), Counter(), Counter()
        self.failures: list[str] = []
        self.gold_p: list[float] = []
        self.gold_r: list[float] = []

    def add(self, result: tuple) -> None:
        self.read += 1
        if result[0] == "fail":
            self.failed[result[1]] += 1
            if len(self.failures) < MAX_LISTED_FAILURES:
                self.failures.append(f"{result[2]}: {result[1]}: {result[3]}")
            return
        rec = result[1]
        self.parsed += 1
        self.formats[rec["source_format"]] += 1
        self.counts["matched"] += rec["matched"]
        self.counts["resolved"] += rec["resolved"] is True
        self.counts["useful"] += rec["useful"]
        self.counts["patch_from_actions"] += rec["patch_source"] == "actions"
        self.counts["paths_checked"] += rec.get("paths_checked") or 0
        self.counts["paths_exist"] += rec.get("paths_exist") or 0
        self.counts["repos_unavailable"] += self.checking and rec["matched"] and "paths_checked" not in rec
        if rec["useful"] and rec.get("gold_files"):
            from codegrep.metrics import precision_recall

            p, r = precision_recall(rec["target_files"], rec["gold_files"])
            self.gold_p.append(p)
            self.gold_r.append(r)

    def merge(self, other: "_Stats") -> None:
        """Add another run's (a work unit's) counters; failures stay in order, the first 50 listed."""
        self.read += other.read
        self.parsed += other.parsed
        self.records += other.records
        self.demonstrations += other.demonstrations
        self.failed.update(other.failed)
        self.formats.update(other.formats)
        self.counts.update(other.counts)
        self.failures += other.failures[: max(0, MAX_LISTED_FAILURES - len(self.failures))]
        self.gold_p += other.gold_p
        self.gold_r += other.gold_r

    def summary(self, seconds: float, workers: int, n_files: int) -> dict[str, Any]:
        c = self.counts
        out = {"files": n_files, "read": self.read, "parsed": self.parsed, "failed": dict(self.failed),
               "failures": self.failures, "matched": c["matched"] if self.matching else None,
               "resolved": c["resolved"], "useful": c["useful"], "records": self.records,
               "demonstrations": self.demonstrations, "formats": dict(self.formats),
               "patch_from_actions": c["patch_from_actions"], "workers": workers, "seconds": round(seconds, 3),
               "trajectories_per_s": round(self.read / seconds, 1) if seconds > 0 else None}
        if c["paths_checked"]:
            out["paths_exist_fraction"] = round(c["paths_exist"] / c["paths_checked"], 4)
        if self.checking:  # matched records left unchecked (placeholder demonstrations): no snapshot under --repos
            out["repos_unavailable"] = c["repos_unavailable"]
        if self.gold_p:
            out["gold"] = {"n": len(self.gold_p), "precision": round(sum(self.gold_p) / len(self.gold_p), 4),
                           "recall": round(sum(self.gold_r) / len(self.gold_r), 4)}
        return out

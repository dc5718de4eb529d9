"""Streaming, parallel mining: work units -> worker processes -> records/demonstrations JSONL + stats.

Workers get small units (one file, or a batch of 16 rows) through ``Pool.imap``; the parent only writes
lines and counts, so memory stays flat in the number of trajectories. A row that cannot be read is
counted under its reason and listed with its ``file:line``; it never stops the run.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

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
        return ("fail", "unrecognised-format" if "unrecognised" in str(exc) else "bad-row", source, str(exc)[:300])
    except Exception as exc:  # a malformed row of a known format: count it, keep going
        return ("fail", f"parse-error:{type(exc).__name__}", source, str(exc)[:300])
    task = options.tasks.get(traj.instance_id)
    record = supervision_record(traj, task)
    env = _environment(task) if options.repos and task is not None else None
    out = record.to_dict()
    out["matched"] = task is not None
    if env is not None:
        checked = list(dict.fromkeys(record.viewed_files + record.target_files))
        out["paths_checked"], out["paths_exist"] = len(checked), sum(p in env.entries for p in checked)
    demo = None
    if options.demonstrations and record.useful:
        problem = traj.problem_statement or (task.problem_statement if task else "")
        demo = demonstration(record, traj.events, problem, env)
    return ("ok", out, demo)


def process_unit(unit: tuple) -> list[tuple]:
    """All results of one work unit (see ``inputs.iter_units``)."""
    kind, label = unit[0], unit[1]
    if kind == "file":
        try:
            with inputs.open_text(label) as fh:
                data = json.load(fh)
        except (ValueError, OSError, EOFError) as exc:
            return [("fail", "invalid-json", label, str(exc)[:300])]
        report = inputs.report_beside(label)
        if isinstance(data, list) and data and all(isinstance(r, dict) and not ("action" in r or "observation" in r)
                                                   for r in data[:5]):
            return [process_row(r, f"{label}[{i}]", report) for i, r in enumerate(data)]
        return [process_row(data, label, report)]
    if kind == "span":  # line numbers are span-relative here; the parent adds the lines of earlier spans
        kind, start, rows = "lines", 1, list(inputs.span_lines(label, unit[2], unit[3]))
        return [("span-lines", label, len(rows))] + process_unit(("lines", label, 1, rows))
    start, rows = unit[2], unit[3]
    report = inputs.report_beside(label) if kind == "lines" else None
    results = []
    for i, row in enumerate(rows, start):
        source = f"{label}:{i}" if kind == "lines" else f"{label}[{i - 1}]"
        if kind == "lines":
            if not row.strip():
                continue
            try:
                row = json.loads(row)
            except ValueError as exc:
                results.append(("fail", "invalid-json", source, str(exc)[:300]))
                continue
        results.append(process_row(row, source, report))
    return results


def _renumber(batches: Iterator[list[tuple]]) -> Iterator[tuple]:
    """Turn span-relative line numbers into file line numbers (batches arrive in file order)."""
    done: dict[str, int] = {}
    for batch in batches:
        if batch and batch[0][0] == "span-lines":
            (_, label, n), batch = batch[0], batch[1:]
            for r in batch:
                line = (r[2] if r[0] == "fail" else r[1]["source"]).rpartition(":")[2]
                fixed = f"{label}:{int(line) + done.get(label, 0)}"
                if r[0] == "fail":
                    r = (r[0], r[1], fixed, r[3])
                else:
                    r[1]["source"] = fixed
                yield r
            done[label] = done.get(label, 0) + n
            continue
        yield from batch


def _results(files: list[str], options: MineOptions, workers: int) -> Iterator[tuple]:
    units = inputs.iter_units(files)
    if workers <= 1:
        _init(options)
        yield from _renumber(map(process_unit, units))
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(workers, initializer=_init, initargs=(options,)) as pool:
        yield from _renumber(pool.imap(process_unit, units, chunksize=1))


def mine_files(paths: list[str], out_path: str | Path, demos_path: str | Path | None = None,
               options: MineOptions | None = None, workers: int = 1, resolved_only: bool = False,
               progress: bool = True) -> dict[str, Any]:
    """Mine ``paths`` into ``out_path`` (records JSONL) and ``demos_path``; returns the stats."""
    from tqdm.auto import tqdm

    options = options or MineOptions()
    files = inputs.expand_inputs(paths)
    stats = _Stats(matching=bool(options.tasks))
    started = time.perf_counter()
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    demo_fh = open(demos_path, "w") if demos_path else None
    try:
        with open(out_path, "w") as out:
            for result in tqdm(_results(files, options, workers), unit="traj", disable=None if progress else True,
                               desc="mining"):
                stats.add(result)
                if result[0] == "ok" and (result[1]["useful"] or not resolved_only):
                    out.write(json.dumps(result[1]) + "\n")
                    stats.records += 1
                if result[0] == "ok" and result[2] is not None and demo_fh:
                    demo_fh.write(json.dumps(result[2]) + "\n")
                    stats.demonstrations += 1
    finally:
        if demo_fh:
            demo_fh.close()
    return stats.summary(time.perf_counter() - started, workers, len(files))


class _Stats:
    """Counters of one mining run."""

    def __init__(self, matching: bool):
        self.matching, self.read, self.parsed, self.records, self.demonstrations = matching, 0, 0, 0, 0
        self.failed, self.formats, self.counts = Counter(), Counter(), Counter()
        self.failures: list[str] = []
        self.gold_p: list[float] = []
        self.gold_r: list[float] = []

    def add(self, result: tuple) -> None:
        from codegrep.metrics import precision_recall

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
        self.counts["paths_checked"] += rec.get("paths_checked", 0)
        self.counts["paths_exist"] += rec.get("paths_exist", 0)
        if rec["useful"] and rec.get("gold_files"):
            p, r = precision_recall(rec["target_files"], rec["gold_files"])
            self.gold_p.append(p)
            self.gold_r.append(r)

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
        if self.gold_p:
            out["gold"] = {"n": len(self.gold_p), "precision": round(sum(self.gold_p) / len(self.gold_p), 4),
                           "recall": round(sum(self.gold_r) / len(self.gold_r), 4)}
        return out

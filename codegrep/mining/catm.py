"""CATM: mine file-access supervision from coding-agent trajectories (library entry points).

``mine`` streams records in-process; ``mine_files`` (runner) is the parallel, file-writing version the
CLI uses; ``mine_profile`` is the cached stage the notebooks call; ``aggregate`` votes across the
trajectories of one instance.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from codegrep.files import atomic_write, write_atomic
from codegrep.mining import inputs
from codegrep.mining.records import SupervisionRecord
from codegrep.mining.runner import MineOptions, _results, mine_files

EMBEDDED_TASKS = "embedded"
VERIFIED_TASKS = "swebench-verified"  # all 500 SWE-bench Verified rows shipped in data/ (gold files for any run)
_RECORD_FIELDS = {f.name for f in fields(SupervisionRecord)}


@dataclass
class MiningResult:
    """What ``mine_profile`` produced (all under ``<artifacts>/mining/``)."""

    records_path: Path
    """Records JSONL, one per parsed trajectory."""
    demonstrations_path: Path
    """Demonstration episodes JSONL (useful records only)."""
    stats: dict[str, Any]
    """The run's stats (the CLI's last line)."""
    records: Any
    """Records as a DataFrame (also saved as ``records.parquet``; columns in docs/mining.md)."""
    aggregate_path: Path | None = None
    """Per-instance aggregation (``aggregate.parquet``)."""


def load_task_map(tasks: Any) -> dict[str, Any]:
    """instance_id -> Task from a list of tasks, a path/HF id (``load_tasks``), ``embedded`` (the 15 rows shipped
    in the package) or ``swebench-verified`` (all 500 Verified rows in ``data/``)."""
    if not tasks:
        return {}
    if isinstance(tasks, (str, Path)):
        from codegrep.data.shipped import verified_rows_path
        from codegrep.data.tasks import load_tasks

        named = {EMBEDDED_TASKS: lambda: inputs.embedded_dir() / "swebench_verified.tasks.jsonl",
                 VERIFIED_TASKS: verified_rows_path}
        src = named[str(tasks)]() if str(tasks) in named else tasks
        tasks = load_tasks(str(src))
    return {t.instance_id: t for t in tasks}


def mine(paths: Iterable[str | Path], fmt: str = "auto", tasks: Any = None,
         repos: str | Path | None = None) -> Iterator[SupervisionRecord]:
    """Supervision records of every readable trajectory under ``paths`` (unreadable rows are skipped;
    use ``mine_files`` to have them counted and listed)."""
    options = MineOptions(fmt=fmt, tasks=load_task_map(tasks), repos=str(repos) if repos else None,
                          demonstrations=False)
    for result in _results(inputs.expand_inputs(list(paths)), options, workers=1):
        if result[0] == "ok":
            yield SupervisionRecord(**{k: v for k, v in result[1].items() if k in _RECORD_FIELDS})


def aggregate(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per instance: trajectory counts, target votes among useful runs, majority targets and the union.

    >>> rows = aggregate([{"instance_id": "i", "useful": True, "resolved": True, "target_files": ["a.py"],
    ...                    "context_files": []},
    ...                   {"instance_id": "i", "useful": True, "resolved": True, "target_files": ["a.py", "b.py"],
    ...                    "context_files": ["c.py"]}])
    >>> rows[0]["targets_vote"], rows[0]["targets_union"], rows[0]["target_votes"]
    (['a.py', 'b.py'], ['a.py', 'b.py'], {'a.py': 2, 'b.py': 1})
    """
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        groups[rec["instance_id"]].append(rec)
    out = []
    for iid, recs in groups.items():
        useful = [r for r in recs if r["useful"]]
        votes = Counter(f for r in useful for f in r["target_files"])
        context = Counter(f for r in useful for f in r["context_files"])
        need = math.ceil(len(useful) / 2)
        out.append({"instance_id": iid, "n_trajectories": len(recs), "n_resolved": sum(r["resolved"] is True for r in recs),
                    "n_useful": len(useful), "target_votes": dict(votes.most_common()),
                    "targets_vote": [f for f, n in votes.most_common() if n >= need],
                    "targets_union": sorted(votes), "context_votes": dict(context.most_common()),
                    "gold_files": next((r.get("gold_files") for r in recs if r.get("gold_files")), None)})
    return out


def records_frame(records_path: Path) -> Any:
    """Records JSONL -> DataFrame with list columns kept and count columns added (for the cost model)."""
    import pandas as pd

    rows = [json.loads(line) for line in open(records_path) if line.strip()]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    for col in ("viewed_files", "edited_files", "target_files", "context_files", "patch_files", "search_patterns"):
        df[f"n_{col}"] = df[col].map(len)
    df["excluded_files"] = df["excluded_files"].map(json.dumps)
    return df


def _cache_key(files: list[str], sec: dict[str, Any]) -> str:
    h = hashlib.sha256(json.dumps(sec, sort_keys=True, default=str).encode())
    for f in files:
        p = Path(f)
        h.update(f"{f}:{p.stat().st_size}:{p.stat().st_mtime_ns}".encode() if p.exists() else f.encode())
    for src in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(src.read_bytes())
    return h.hexdigest()


def mine_profile(cfg: dict[str, Any], out: Any) -> MiningResult:
    """The mining stage of a profile (``mining:`` section), cached under ``<artifacts>/mining``."""
    from codegrep.config import section

    sec = section(cfg, "mining")
    raw = sec.get("inputs") or [inputs.EMBEDDED]
    # one input given as a string (--set mining.inputs=/my/runs) is one input, not one per character ('/')
    paths = [str(raw)] if isinstance(raw, (str, Path)) else [str(p) for p in raw]
    files = inputs.expand_inputs(paths)
    work = Path(out.artifacts) / "mining"
    work.mkdir(parents=True, exist_ok=True)
    rec_path, demo_path, stats_path = work / "records.jsonl", work / "demonstrations.jsonl", work / "stats.json"
    key = _cache_key(files, sec)
    key_path = work / "cache_key.txt"
    if key_path.is_file() and key_path.read_text() == key and stats_path.is_file():
        stats = json.loads(stats_path.read_text())
    else:
        options = MineOptions(fmt=sec.get("format", "auto"), tasks=load_task_map(sec.get("tasks")),
                              repos=sec.get("repos"), demonstrations=sec.get("demonstrations", True))
        stats = mine_files(paths, rec_path, demo_path, options, workers=int(sec.get("workers", 1)),
                           resolved_only=bool(sec.get("resolved_only", False)))
        write_atomic(stats_path, json.dumps(stats, indent=2))
        df = records_frame(rec_path)
        with atomic_write(work / "records.parquet") as fh:
            df.to_parquet(fh, index=False)
        agg = aggregate(json.loads(line) for line in open(rec_path) if line.strip())
        import pandas as pd

        with atomic_write(work / "aggregate.parquet") as fh:
            pd.DataFrame([{**a, "target_votes": json.dumps(a["target_votes"]),
                           "context_votes": json.dumps(a["context_votes"])} for a in agg]).to_parquet(fh, index=False)
        write_atomic(key_path, key)  # last: marks the cache complete
    import pandas as pd

    return MiningResult(rec_path, demo_path, stats, pd.read_parquet(work / "records.parquet"),
                        work / "aggregate.parquet")

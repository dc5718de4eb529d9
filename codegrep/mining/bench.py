"""``codegrep bench mine``: throughput and memory of mining, replaying the embedded REAL trajectories.

The real rows are written many times into one ``.jsonl`` (with the mini-swe-agent harness reports merged
into a ``report.json`` keyed by instance id beside it), then mined twice in the same run: one process
(the baseline) on a slice, and ``workers`` processes on the whole file. Projections to the paper's 67K
trajectories are linear in the measured rate.
"""
from __future__ import annotations

import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from codegrep.mining import inputs
from codegrep.mining.runner import MineOptions, mine_files

PAPER_TRAJECTORIES = 67_000


def real_rows() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every embedded real trajectory row, and the merged harness reports."""
    rows, reports = [], {}
    for f in inputs.expand_inputs([inputs.EMBEDDED]):
        with inputs.open_text(f) as fh:
            data = json.load(fh)
        rows += data if isinstance(data, list) else [data]
        report = inputs.report_beside(f)
        if isinstance(report, dict):
            reports.update(report if all(isinstance(v, dict) for v in report.values()) else {})
    return rows, reports


def write_replay(path: Path, n: int) -> int:
    """``n`` rows cycling through the real samples (one JSON line each); returns bytes written."""
    rows, reports = real_rows()
    lines = [json.dumps(r) + "\n" for r in rows]
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(lines[i % len(lines)])
    (path.parent / "report.json").write_text(json.dumps(reports))
    return path.stat().st_size


def _peak_rss_mb() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return round(own, 1), round(children, 1)


def bench_mine(n: int = 2000, workers: int = 2, baseline_n: int = 300, demonstrations: bool = True) -> dict[str, Any]:
    """Mine ``n`` replayed rows with ``workers`` processes and ``baseline_n`` with one; print-ready stats."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base_file, full_file = tmp / "base" / "replay.jsonl", tmp / "full" / "replay.jsonl"
        base_file.parent.mkdir()
        full_file.parent.mkdir()
        write_replay(base_file, baseline_n)
        size = write_replay(full_file, n)
        options = MineOptions(demonstrations=demonstrations)
        base = mine_files([str(base_file)], tmp / "b.jsonl", tmp / "bd.jsonl", options, 1, progress=False)
        t0 = time.perf_counter()
        full = mine_files([str(full_file)], tmp / "f.jsonl", tmp / "fd.jsonl", options, workers, progress=False)
        wall = time.perf_counter() - t0
    rate = full["read"] / wall
    own, children = _peak_rss_mb()
    return {"trajectories": full["read"], "parsed": full["parsed"], "failed": full["failed"], "workers": workers,
            "input_mb": round(size / 2**20, 1), "seconds": round(wall, 2), "trajectories_per_s": round(rate, 1),
            "baseline_single_process_per_s": base["trajectories_per_s"],
            "speedup_vs_single_process": round(rate / base["trajectories_per_s"], 2),
            "projected_seconds_for_67k": round(PAPER_TRAJECTORIES / rate, 1),
            "target_seconds_for_67k": 120, "meets_time_target": PAPER_TRAJECTORIES / rate < 120,
            "peak_rss_mb_parent": own, "peak_rss_mb_worker": children,
            "meets_memory_target": own + children * max(1, workers) < 1024,
            "source": "real embedded trajectories, replayed"}

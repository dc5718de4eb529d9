"""Inputs -> work units: files, directories (recursive), .jsonl/.json/.traj/.parquet (optionally .gz),
the embedded real samples (``embedded``) and Hugging Face dataset ids (streamed; online only).

A unit is a small picklable tuple handed to a worker process; memory stays flat because ``.jsonl``,
``.parquet`` and hub datasets are read in batches, never whole.
"""
from __future__ import annotations

import gzip
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

EMBEDDED = "embedded"
SUFFIXES = (".jsonl", ".json", ".traj", ".parquet")
_HF_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
BATCH = 16  # rows per unit: big enough to amortise IPC, small enough to keep workers busy

SPAN_BYTES = 4 << 20  # plain .jsonl is split by byte ranges: workers read their own lines, the parent reads nothing
# ("file", path) | ("span", path, start_byte, end_byte) | ("lines", path, first_line_no, [lines])
# | ("rows", label, first_index, [rows])
Unit = tuple


def embedded_dir() -> Path:
    """The real sample trajectories shipped inside the package."""
    return Path(__file__).resolve().parent.parent / "resources" / "trajectories"


def _base(path: Path) -> str:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name


def is_trajectory_file(path: Path) -> bool:
    """Trajectory data files; SWE-bench reports beside them are not.

    >>> is_trajectory_file(Path("a.traj.json")), is_trajectory_file(Path("a.report.json.gz"))
    (True, False)
    >>> is_trajectory_file(Path("swebench_verified.tasks.jsonl"))
    False
    """
    base = _base(path)
    return base.endswith(SUFFIXES) and not base.endswith((".report.json", ".tasks.jsonl")) \
        and base != "report.json" and not base.startswith(("LICENSE", "README"))


def expand_inputs(inputs: list[str | os.PathLike]) -> list[str]:
    """Files (sorted, recursive for directories) and hub ids; raises FileNotFoundError naming the input."""
    out: list[str] = []
    for item in inputs:
        item = str(item)
        path = embedded_dir() if item == EMBEDDED else Path(item).expanduser()
        if path.is_dir():
            out += sorted(str(p) for p in path.rglob("*") if p.is_file() and is_trajectory_file(p))
        elif path.is_file():
            out.append(str(path))
        elif _HF_ID.match(item) and not item.startswith((".", "/")):
            out.append("hf://" + item)
        else:
            raise FileNotFoundError(f"mining input not found: {item} (a file, a directory, 'embedded' "
                                    f"or a Hugging Face dataset id owner/name)")
    return out


def open_text(path: str | Path):
    """Open a (possibly gzip-compressed) text file."""
    path = str(path)
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def _hf_rows(dataset_id: str) -> Iterator[dict[str, Any]]:
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise RuntimeError(f"cannot stream Hugging Face dataset {dataset_id!r}: offline (HF_HUB_OFFLINE=1); "
                           f"download it first and pass the local .parquet/.jsonl files")
    try:
        import datasets

        stream = datasets.load_dataset(dataset_id, split="train", streaming=True)
        yield from stream
    except (ConnectionError, OSError, ValueError) as exc:  # datasets wraps network failures in these
        raise RuntimeError(f"cannot stream Hugging Face dataset {dataset_id!r}: {exc}") from exc


def _batched(label: str, rows: Iterator[Any], kind: str) -> Iterator[Unit]:
    batch: list[Any] = []
    start = 1
    for i, row in enumerate(rows, 1):
        if not batch:
            start = i
        batch.append(row)
        if len(batch) >= BATCH:
            yield (kind, label, start, batch)
            batch = []
    if batch:
        yield (kind, label, start, batch)


def _parquet_rows(path: str) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH):
        yield from batch.to_pylist()


def iter_units(files: list[str]) -> Iterator[Unit]:
    """Work units of expanded inputs, in order, streamed."""
    for f in files:
        base = _base(Path(f))
        if f.startswith("hf://"):
            yield from _batched(f, _hf_rows(f[5:]), "rows")
        elif f.endswith(".jsonl"):
            size = os.path.getsize(f)
            yield from (("span", f, start, min(size, start + SPAN_BYTES)) for start in range(0, size, SPAN_BYTES))
        elif base.endswith(".jsonl"):
            with open_text(f) as fh:
                yield from _batched(f, (line for line in fh), "lines")
        elif base.endswith(".parquet"):
            yield from _batched(f, _parquet_rows(f), "rows")
        else:
            yield ("file", f)


def span_lines(path: str, start: int, end: int) -> Iterator[bytes]:
    """The lines that begin in bytes [start, end) of a file (a line crossing ``end`` belongs to this span)."""
    with open(path, "rb") as fh:
        if start:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the partial first line belongs to the previous span
        while fh.tell() < end:
            line = fh.readline()
            if not line:
                break
            yield line


@lru_cache(maxsize=64)
def report_beside(path: str) -> Any:
    """The SWE-bench ``report.json`` next to a trajectory file: ``<stem>.report.json`` or ``report.json``."""
    p = Path(path)
    stem = _base(p)
    for suffix in (".traj.json", ".traj", ".json", ".jsonl", ".parquet"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    for name in (f"{stem}.report.json", f"{stem}.report.json.gz", "report.json", "report.json.gz"):
        cand = p.parent / name
        if cand.is_file():
            try:
                with open_text(cand) as fh:
                    return json.load(fh)
            except (ValueError, OSError):
                return None
    return None

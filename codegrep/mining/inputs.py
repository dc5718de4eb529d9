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
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from codegrep.data.swebench_report import EVAL_SUFFIX
from codegrep.errors import UserError
from codegrep.files import MAX_JSON_DEPTH

EMBEDDED = "embedded"
SUFFIXES = (".jsonl", ".json", ".traj", ".parquet")
_HF_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
BATCH = 16  # rows per unit: big enough to amortise IPC, small enough to keep workers busy

SPAN_BYTES = 4 << 20  # plain .jsonl is split by byte ranges: workers read their own lines, the parent reads nothing
# ("files", [paths]) | ("span", path, start_byte, end_byte, first_line_no) | ("lines", path, first_line_no, [lines])
# | ("rows", label, first_index, [rows])
Unit = tuple


def embedded_dir() -> Path:
    """The real sample trajectories shipped inside the package."""
    return Path(__file__).resolve().parent.parent / "resources" / "trajectories"


def _shipped_runs() -> list[str]:
    from codegrep.data.shipped import trajectory_dirs

    dirs = [str(d) for d in trajectory_dirs() if d.is_dir()]
    if not dirs:
        raise FileNotFoundError(f"mining input 'shipped': no real runs under {trajectory_dirs()[0].parent} "
                                f"(see data/README.md)")
    return dirs


NAMED = {
    "shipped": _shipped_runs,
    "format-samples": lambda: [str(embedded_dir() / "format-samples")],
}
"""Input names: ``shipped`` = the 400 real mini-swe-agent runs in ``data/`` (with harness reports);
``format-samples`` = the embedded real rows of the other formats; ``embedded`` = the package's samples
(15 mini-swe-agent runs + the format samples)."""


def _base(path: Path) -> str:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name


def is_trajectory_file(path: Path) -> bool:
    """Trajectory data files; SWE-bench reports beside them are not.

    >>> is_trajectory_file(Path("a.traj.json")), is_trajectory_file(Path("a.report.json.gz"))
    (True, False)
    >>> is_trajectory_file(Path("swebench_verified.tasks.jsonl")), is_trajectory_file(Path("out.swebench_eval.jsonl"))
    (False, False)
    """
    base = _base(path)
    return base.endswith(SUFFIXES) and not base.endswith((".report.json", ".tasks.jsonl", EVAL_SUFFIX)) \
        and base != "report.json" and not base.startswith(("LICENSE", "README"))


def expand_inputs(inputs: list[str | os.PathLike]) -> list[str]:
    """Files (sorted, recursive for directories) and hub ids; raises FileNotFoundError naming the input."""
    out: list[str] = []
    for item in inputs:
        item = str(item)
        if item in NAMED:
            out += expand_inputs(NAMED[item]())
            continue
        path = embedded_dir() if item == EMBEDDED else Path(item).expanduser()
        if path.is_dir():
            out += sorted(str(p) for p in path.rglob("*") if p.is_file() and is_trajectory_file(p))
        elif path.is_file():
            out.append(str(path))
        elif _HF_ID.match(item) and not item.startswith((".", "/")):
            _refuse_offline(item)  # here, not in the pool's feeder thread, where it would read as a bug
            out.append("hf://" + item)
        else:
            raise FileNotFoundError(f"mining input not found: {item} (a file, a directory, 'embedded', 'shipped', "
                                    f"'format-samples' or a Hugging Face dataset id owner/name)")
    return out


def open_text(path: str | Path):
    """Open a (possibly gzip-compressed) text file."""
    path = str(path)
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


try:  # 2-3x faster than json on large trajectories; optional
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


def loads(data: bytes | str) -> Any:
    """Parse JSON text (``orjson`` when installed, else ``json``); raises ValueError on bad JSON."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass  # NaN/Infinity or huge integers (Python's json writes them): the stdlib reads them, or says where
    try:
        return json.loads(data)
    except RecursionError:  # deeper than Python's parser can go: a bad row like any other
        raise ValueError(f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)") from None


def dumps_line(value: Any) -> bytes:
    """One JSONL line (UTF-8 bytes, newline included)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value, option=_orjson.OPT_APPEND_NEWLINE | _orjson.OPT_NON_STR_KEYS)
        except TypeError:  # a file name that is not UTF-8 (surrogate escapes): the stdlib writes them as \\udcXX
            pass
    return (json.dumps(value) + "\n").encode()


try:  # ISA-L's inflate is about twice zlib's speed; optional
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - depends on the environment
    import zlib as _zlib


def read_bytes(path: str | Path) -> bytes:
    """The bytes of a file, gunzipped (in one call, all members) when it ends in ``.gz``."""
    with open(path, "rb") as fh:
        data = fh.read()
    if not str(path).endswith(".gz"):
        return data
    try:
        out = _zlib.decompressobj(31)
        parts = [out.decompress(data)]
        while out.unused_data:  # concatenated gzip members
            rest, out = out.unused_data, _zlib.decompressobj(31)
            parts.append(out.decompress(rest))
        if not out.eof:
            raise EOFError(f"{path}: truncated, or not gzip data")
        return b"".join(parts)
    except _zlib.error as exc:
        raise ValueError(f"{path}: not a valid gzip file ({exc})") from exc


def read_json(path: str | Path) -> Any:
    """The JSON value of a (possibly gzipped) file; ValueError/OSError/EOFError on a bad file."""
    return loads(read_bytes(path))


def _refuse_offline(dataset_id: str) -> None:
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise RuntimeError(f"cannot stream Hugging Face dataset {dataset_id!r}: offline (HF_HUB_OFFLINE=1); "
                           f"download it first and pass the local .parquet/.jsonl files")


def _hf_rows(dataset_id: str) -> Iterator[dict[str, Any]]:
    _refuse_offline(dataset_id)
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


FILES_PER_UNIT = 8  # trajectory files per work unit: amortises inter-process traffic


def _span_units(path: str) -> Iterator[Unit]:
    """Byte spans of a plain ``.jsonl``, each with the file line number its first line has (newlines
    before it are counted here, at memory speed, so workers can name ``file:line`` themselves)."""
    size, line = os.path.getsize(path), 1
    with open(path, "rb") as fh:
        for start in range(0, size, SPAN_BYTES):
            end = min(size, start + SPAN_BYTES)
            yield ("span", path, start, end, _first_line(fh, start, line))
            fh.seek(start)
            line += fh.read(end - start).count(b"\n")


def _first_line(fh: Any, start: int, line_at_start: int) -> int:
    """Line number of the first line that begins at or after byte ``start`` (see ``span_lines``)."""
    if not start:
        return 1
    fh.seek(start - 1)
    return line_at_start if fh.read(1) == b"\n" else line_at_start + 1


def iter_units(files: list[str]) -> Iterator[Unit]:
    """Work units of expanded inputs, in order, streamed; whole-file trajectories are batched."""
    batch: list[str] = []
    for f in files:
        base = _base(Path(f))
        if not (f.startswith("hf://") or base.endswith((".jsonl", ".parquet"))):
            batch.append(f)
            if len(batch) >= FILES_PER_UNIT:
                yield ("files", batch)
                batch = []
            continue
        if batch:
            yield ("files", batch)
            batch = []
        if f.startswith("hf://"):
            yield from _batched(f, _hf_rows(f[5:]), "rows")
        elif f.endswith(".jsonl"):
            yield from _span_units(f)
        else:  # read here (in the pool's feeder thread): a file that cannot be read is one UserError naming it
            try:
                if base.endswith(".jsonl"):
                    with open_text(f) as fh:
                        yield from _batched(f, (line for line in fh), "lines")
                else:
                    yield from _batched(f, _parquet_rows(f), "rows")
            except UserError:
                raise
            except (OSError, EOFError, ValueError) as exc:  # not gzip, not UTF-8, not parquet (ArrowInvalid)
                raise UserError(f"{f}: cannot read it ({type(exc).__name__}: {exc})") from None
    if batch:
        yield ("files", batch)


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
def _report_at(path: str, stamp: tuple, instance_id: str | None) -> Any:
    """A report file's value, read once per version of the file (``_stamp`` is in the key). A file named for one
    instance (``instance_id``) is read as the harness reads its ``<id>/report.json`` (``swebench_report.named_report``:
    empty, not JSON, or no record of the instance is that instance's error); a file shared by several runs
    (``report.json`` beside them) that cannot be read says nothing (None)."""
    from codegrep.data.swebench_report import harness_error, named_report

    try:
        value = read_json(path)
    except (ValueError, OSError, EOFError) as exc:
        return None if instance_id is None else harness_error(path, f"empty or not JSON ({str(exc)[:120]})")
    return value if instance_id is None else named_report(value, instance_id, path)


@lru_cache(maxsize=16)
def _evaluation_at(path: str, stamp: tuple) -> Any:
    """OpenHands' evaluation beside an ``output.jsonl`` (``swebench_report.evaluation_beside``), read once per version
    by the one reader (``load_report``: a bad file is one ``UserError`` naming it)."""
    from codegrep.data.swebench_report import load_report

    return load_report(path, whole_run=True)


def _stamp(path: Path) -> tuple:
    """(mtime, size) of a file, or of every ``report.json`` under a directory: a report rewritten is read again."""
    files = sorted(path.glob("*/report.json")) if path.is_dir() else [path]
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)


def report_beside(path: str) -> Any:
    """The SWE-bench report next to a trajectory file: ``<stem>.report.json``, ``<id>.report.json`` (the id the file
    name gives once every known suffix is gone: ``<id>.events.json``, ``<id>.history.json`` ...) or ``report.json``;
    beside a ``.jsonl`` of runs (OpenHands' ``output.jsonl``), first the evaluation OpenHands' eval_infer leaves there
    (``output.swebench_eval.jsonl``, ``report.json``, ``eval_outputs/<id>/report.json``). A report named for an
    instance (``<id>.report.json``, or ``report.json`` in the harness's ``<id>/`` directory) is read as the harness
    reads it (``_report_at``). Looked up at each call (a report the harness writes later, in a long-lived process,
    is seen); a file is read once per version."""
    from codegrep.data.swebench_report import evaluation_beside
    from codegrep.mining.ids import id_from_name, is_instance_id

    p = Path(path)
    stem = _base(p)
    if stem.endswith(".jsonl") and (evaluation := evaluation_beside(p)) is not None:
        return _evaluation_at(str(evaluation), _stamp(evaluation))
    single = not stem.endswith((".jsonl", ".parquet"))  # one run's file (a .json list of rows is read as such too)
    for suffix in (".traj.json", ".traj", ".json", ".jsonl", ".parquet"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    stems = dict.fromkeys((stem, id_from_name(p.name)))
    names = [(f"{s}.report.json{gz}", s) for s in stems for gz in ("", ".gz")]
    for name, named in (*names, ("report.json", p.parent.name), ("report.json.gz", p.parent.name)):
        try:
            st = (p.parent / name).stat()
        except OSError:  # not there (or not reachable): the next name
            continue
        if stat.S_ISREG(st.st_mode):
            own = named if single and is_instance_id(named) else None
            return _report_at(str(p.parent / name), (st.st_mtime_ns, st.st_size), own)
    return None

"""The one helper notebooks save through: figures (PNG + SVG), tables (parquet), JSON, headlines.

Every file is written through ``codegrep.files.atomic_write`` (a temporary sibling renamed into place).

Headlines are the few numbers a notebook's last cell records; ``codegrep report`` and the tests
read them back from ``<artifacts>/headlines/<notebook>.json``.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codegrep.files import atomic_write, json_text, write_atomic


@dataclass
class Outputs:
    """Where one run writes: ``artifacts`` (numbers) and ``figures`` (plots)."""

    artifacts: Path = Path("artifacts")
    """Directory for parquet/JSON outputs and headline numbers."""
    figures: Path = Path("figures")
    """Directory for PNG and SVG figures."""

    def __post_init__(self) -> None:
        self.artifacts, self.figures = Path(self.artifacts), Path(self.figures)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.figures.mkdir(parents=True, exist_ok=True)

    def figure(self, fig: Any, name: str, note: str | None = None) -> list[Path]:
        """Save a matplotlib figure as ``<name>.png`` and ``<name>.svg``; ``note`` is stamped on it
        (use it to label simulated or model-derived numbers)."""
        from codegrep.plots import mark_source, save

        if note:
            mark_source(fig, note)
        return [save(fig, self.figures / f"{name}.{kind}") for kind in ("png", "svg")]

    def table(self, df: Any, name: str) -> Path:
        """Save a DataFrame as ``<name>.parquet``."""
        path = self.artifacts / f"{name}.parquet"
        with atomic_write(path, "wb") as fh:
            df.to_parquet(fh, index=False)
        return path

    def json(self, obj: Any, name: str) -> Path:
        """Save any JSON-able object (NaN becomes null) as ``<name>.json``."""
        path = self.artifacts / f"{name}.json"
        write_atomic(path, json_text(obj, indent=2, sort_keys=True))
        return path

    def headline(self, notebook: str, numbers: dict[str, Any], source: str = "run",
                 reasons: dict[str, str] | None = None, sources: dict[str, str] | None = None) -> Path:
        """Record a notebook's headline numbers.

        ``source`` says what produced them (``run`` measured, ``model`` the replay cost model, ``fit`` an
        observational estimate, ``simulation``); ``sources`` overrides it per key. ``reasons`` says, per key,
        why a number is empty (None/NaN) in this run, so the report never shows a blank without a reason.
        """
        path = self.artifacts / "headlines" / f"{notebook}.json"
        record = {"notebook": notebook, "source": source, "sources": dict(sources or {}),
                  "reasons": dict(reasons or {}),
                  "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "numbers": numbers,
                  "peak_rss_mb": peak_rss_mb()}
        write_atomic(path, json_text(record, indent=2, sort_keys=True))
        return path


def peak_rss_mb() -> float | None:
    """The largest resident set any one process of this one's tree has held so far, in MB: this process's own
    high-water mark or, if larger, that of its largest finished child (``getrusage``; a maximum, not a sum). A
    notebook's last cell records it with the headline numbers, so each notebook's peak memory is in ``run.json``
    (``notebook_peak_rss_mb``). None where ``resource`` is missing (not POSIX).

    >>> peak_rss_mb() > 0
    True
    """
    try:
        import resource
    except ImportError:  # pragma: no cover (Windows)
        return None
    kb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return round(kb / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)  # bytes on macOS, KiB on Linux


def runs_dir(artifacts: str | Path | None, default_out: str | Path) -> Path:
    """Where a notebook's training runs live: ``<artifacts>/train`` when it has an artifacts directory, else the
    training config's own ``out`` (``codegrep train``). Used by the main run and the ablation alike.

    >>> runs_dir("artifacts", "runs").as_posix(), runs_dir(None, "runs").as_posix()
    ('artifacts/train', 'runs')
    """
    return Path(artifacts) / "train" if artifacts is not None else Path(default_out)


def read_headline(artifacts: Path, notebook: str) -> dict[str, Any]:
    """The headline record a notebook wrote (raises FileNotFoundError naming the path)."""
    path = Path(artifacts) / "headlines" / f"{notebook}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no headline numbers at {path}: run notebook {notebook} first")
    return json.loads(path.read_text())


def key_value_table(record: dict[str, Any], skip: tuple[str, ...] = (), na: str = "n/a") -> Any:
    """A dict as a two-column table for a notebook (``quantity``, ``value``): nested dicts flattened with dots,
    lists of scalars joined, long lists counted, empty values shown as ``na``, keys in ``skip`` (and paths:
    machine-specific noise) left out.

    >>> key_value_table({"n": 3, "p": None, "formats": {"a": 1}, "path": "/tmp/x", "ids": [1, 2]},
    ...                 skip=("path",)).values.tolist()
    [['n', '3'], ['p', 'n/a'], ['formats.a', '1'], ['ids', '1, 2']]
    """
    import pandas as pd

    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if str(k) not in skip:
                    walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        if value is None or (isinstance(value, float) and not math.isfinite(value)) or value == [] or value == {}:
            text = na
        elif isinstance(value, (list, tuple)):
            text = ", ".join(map(str, value)) if len(value) <= 8 and all(
                not isinstance(v, (dict, list)) for v in value) else f"{len(value)} items"
        elif isinstance(value, float):
            text = f"{value:,.4g}"
        elif isinstance(value, (str, Path)) and str(value).startswith("/"):
            return  # an absolute path: machine-specific, never shown
        else:
            text = str(value)
        rows.append((prefix, text))

    walk("", record)
    return pd.DataFrame(rows, columns=["quantity", "value"])

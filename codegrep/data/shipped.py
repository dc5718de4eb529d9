"""The real data shipped in the project's ``data/`` folder (see ``data/README.md`` for provenance).

One place that knows where it lives, so no library code reaches for ``../shared``:

- :func:`data_root` — ``<checkout>/data`` (``CODEGREP_DATA`` overrides).
- :func:`verified_rows_path`, :func:`lite_rows_path` — SWE-bench Verified / Lite rows (``.jsonl.gz``).
- :func:`trajectory_dirs` — the real mini-swe-agent runs (``<id>.traj.json.gz`` + ``<id>.report.json``).
- :func:`snapshot_repos_dir` — the shallow bare repositories, extracted once from their ``.tar`` into the cache
  (the checkout is never written to) and returned as a ``--repos`` directory of ``owner__name.git``.
"""
from __future__ import annotations

import os
import tarfile
from pathlib import Path

from codegrep.config import cache_dir, project_root


def data_root() -> Path:
    """``CODEGREP_DATA`` if set, else ``<checkout>/data``."""
    env = os.environ.get("CODEGREP_DATA")
    return Path(env).expanduser() if env else project_root() / "data"


def verified_rows_path() -> Path:
    """All 500 SWE-bench Verified rows, gzipped JSONL."""
    return data_root() / "swebench" / "swebench_verified.jsonl.gz"


def lite_rows_path() -> Path:
    """All 300 SWE-bench Lite rows, gzipped JSONL."""
    return data_root() / "swebench" / "swebench_lite.jsonl.gz"


def trajectory_dirs() -> list[Path]:
    """Folders of real mini-swe-agent runs (400 in all), each run with its harness ``report.json``."""
    root = data_root() / "trajectories"
    return [root / "mini-swe-agent", root / "mini-swe-agent-gemini-3-pro"]


def snapshot_archives() -> list[Path]:
    """The shipped ``owner__name.git.tar`` archives."""
    return sorted((data_root() / "verified-repos").glob("*.git.tar"))


def snapshot_repos_dir() -> Path:
    """A directory of bare ``owner__name.git`` repositories extracted from the shipped archives (once, cached).

    Extraction goes to ``<cache>/snapshots/<archive size-mtime key>/`` through a temporary folder and a rename,
    so concurrent callers and a killed extraction never leave a half repository in use.
    """
    archives = snapshot_archives()
    if not archives:
        raise FileNotFoundError(f"no shipped repository snapshots (*.git.tar) under {data_root() / 'verified-repos'}")
    out = cache_dir() / "snapshots"
    out.mkdir(parents=True, exist_ok=True)
    for tar in archives:
        st = tar.stat()
        dest = out / tar.name[: -len(".tar")]
        stamp = dest / ".codegrep-extracted"
        key = f"{st.st_size}-{int(st.st_mtime)}"
        if stamp.is_file() and stamp.read_text() == key:
            continue
        tmp = out / f".{tar.name}.{os.getpid()}.tmp"
        with tarfile.open(tar) as tf:
            tf.extractall(tmp, filter="data")
        inner = tmp / dest.name
        (inner / ".codegrep-extracted").write_text(key)
        if dest.exists():
            import shutil

            shutil.rmtree(dest, ignore_errors=True)
        os.replace(inner, dest)
        tmp.rmdir()
    return out

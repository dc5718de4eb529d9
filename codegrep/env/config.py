"""``ToolConfig``: caps, timeouts and parallelism of the tools (the ``env:`` section of a profile)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolConfig:
    """Caps, timeouts and parallelism of the tools (the ``env:`` section of a profile)."""

    max_output_lines: int = field(default=200, metadata={"range": ">= 1"})
    """grep: most result lines returned (a note says how many were cut)."""
    max_output_bytes: int = field(default=16_000, metadata={"range": ">= 1"})
    """grep/glob/read: most bytes of output returned."""
    max_read_lines: int = field(default=200, metadata={"range": ">= 1"})
    """read: most lines returned per call (the default window when ``end_line`` is omitted)."""
    max_glob_results: int = field(default=200, metadata={"range": ">= 1"})
    """glob: most paths returned."""
    max_line_chars: int = field(default=400, metadata={"range": ">= 1"})
    """Longer lines (minified code) are cut to this many characters."""
    max_context: int = field(default=10, metadata={"range": ">= 0"})
    """grep: largest accepted ``context``."""
    max_file_bytes: int = field(default=8_000_000, metadata={"range": ">= 1"})
    """read refuses, and grep skips, files larger than this."""
    capture_bytes: int = field(default=4_000_000, metadata={"range": ">= 1"})
    """Raw subprocess output read before the process is killed (bounds memory on ``grep .``)."""
    timeout_s: float = field(default=10.0, metadata={"range": "> 0"})
    """Per-call timeout; the call's whole process group is killed when it fires."""
    workers: int = field(default=8, metadata={"range": ">= 1"})
    """Calls of one turn run in parallel on at most this many threads."""
    store_root: str | None = None
    """Checkout-free mode: where the shared blob store lives (None: ``<cache>/blobs``)."""

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None, source: str = "env") -> "ToolConfig":
        """Build from a profile's ``env`` section; the pool's keys are skipped, an unknown key fails naming it."""
        from codegrep.config import from_mapping

        return from_mapping(cls, values, source, ignore=ENV_OTHER_KEYS)


ENV_OTHER_KEYS = ("mode", "pool_root", "max_worktrees", "max_disk_gb", "bench")
"""Keys of the ``env`` section that are not ``ToolConfig`` fields (environment mode, worktree pool, benchmark)."""

"""The value a retriever returns."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Retrieval:
    """A ranked file list plus what it cost to produce."""

    files: list[str]
    """Repository-relative paths, best first."""
    rounds: int = 0
    """Agent turns used (0 for one-shot retrievers)."""
    tool_calls: int = 0
    """Tool calls issued (0 for one-shot retrievers)."""
    tokens: int = 0
    """Model tokens (prompt + completion) spent (0 without a model)."""
    seconds: float = 0.0
    """Wall time of this retrieval."""
    reasons: dict[str, str] = field(default_factory=dict)
    """One line per file saying what led to it (grep hits, read ranges, scores)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Retriever-specific details (e.g. the episode path of an agent run)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

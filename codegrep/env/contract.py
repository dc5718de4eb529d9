"""The tool contract shared by agent, trainer, MCP server and tests: names and value types only.

Nothing here imports an implementation; ``codegrep.env.tools`` is the wiring (the factory and re-exports).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

TOOL_NAMES = ("grep", "glob", "read")
"""The tools an environment answers (``submit`` is handled by the agent loop)."""
ENV_MODES = ("objects", "worktree")
"""``env.mode`` values: checkout-free (git objects + a shared blob store) or a pooled git worktree."""


@dataclass
class ToolCall:
    """One call the model made."""

    name: str
    """Tool name: ``grep``, ``glob`` or ``read`` (anything else is answered with an error)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments as the model wrote them (validated by the environment, never trusted)."""


@dataclass
class ToolResult:
    """What the environment answered to one call; errors are results, never exceptions."""

    name: str
    ok: bool
    output: str = ""
    error: str = ""
    truncated: bool = False
    latency_ms: float = 0.0
    bytes_out: int = 0
    files: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The listed names a grep's ``path:line:text`` lines start with, as the environment knows them (ripgrep's
    ``--null`` ends each path), so a name holding ``:12:`` parses whole (``codegrep.retrievers.heuristic.split_hit``);
    empty for a result rebuilt from text. Not part of what the model sees."""

    def text(self) -> str:
        """Exactly what the model sees for this call."""
        return self.output if self.ok else f"ERROR: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ToolError(ValueError):
    """A call that cannot be answered (missing file, bad regex, ...); the message goes to the model."""

"""One parser per public trajectory format, and auto-detection.

>>> detect_format({"trajectory_format": "mini-swe-agent-1", "messages": []})
'mini-swe-agent'
>>> detect_format({"messages": [], "run_id": "r", "test_result": {}})
'swe-gym-openhands'
>>> detect_format({"foo": 1}) is None
True
"""
from __future__ import annotations

from typing import Any, Callable

from codegrep.mining.formats import messages, minisweagent, openhands, sweagent
from codegrep.mining.formats.base import Trajectory

Parser = Callable[..., Trajectory]

# Detection order matters: the most specific signature first.
FORMATS: dict[str, tuple[Callable[[Any], bool], Parser]] = {
    minisweagent.NAME: (minisweagent.detect, minisweagent.parse),
    sweagent.TRAJ: (sweagent.detect_traj, sweagent.parse_traj),
    sweagent.NEBIUS: (sweagent.detect_nebius, sweagent.parse_nebius),
    openhands.NAME: (openhands.detect, openhands.parse),
    messages.SWE_GYM: (messages.detect_swe_gym, messages.parse_swe_gym),
    messages.SWE_SMITH: (messages.detect_swe_smith, messages.parse_swe_smith),
}


def detect_format(row: Any) -> str | None:
    """Name of the first format whose signature the row has, or None."""
    if isinstance(row, list):
        return openhands.NAME if openhands.detect(row) else None
    if not isinstance(row, dict):
        return None
    return next((name for name, (detect, _) in FORMATS.items() if detect(row)), None)


def parse_row(row: Any, fmt: str = "auto", source: str = "", report: Any = None) -> Trajectory:
    """Parse one row; raises ValueError naming ``source`` when the format is unknown or does not match."""
    name = detect_format(row) if fmt == "auto" else fmt
    if name is None:
        keys = sorted(row)[:8] if isinstance(row, dict) else type(row).__name__
        raise ValueError(f"{source}: unrecognised trajectory format (keys: {keys})")
    if name not in FORMATS:
        raise ValueError(f"unknown --format {name!r}; choose auto or one of {', '.join(FORMATS)}")
    if fmt != "auto" and not _signature(name, row) and (found := detect_format(row)) is not None:
        # a forced format that is not the row's: its parser would read nothing (a record without events)
        raise ValueError(f"{source}: row does not match --format {name} (it is a {found} row)")
    traj = FORMATS[name][1](row, source=source, report=report)
    if fmt != "auto" and not traj.n_steps and not traj.events and not _signature(name, row):
        # a forced format that found no step in a row no format recognises: an empty run, not a record
        keys = sorted(row)[:8] if isinstance(row, dict) else type(row).__name__
        raise ValueError(f"{source}: row does not match --format {name} (no step of that format; no known format "
                         f"recognises it either, keys: {keys})")
    return traj


def _signature(name: str, row: Any) -> bool:
    if isinstance(row, list):
        return name == openhands.NAME and openhands.detect(row)
    return isinstance(row, dict) and FORMATS[name][0](row)


__all__ = ["FORMATS", "Trajectory", "detect_format", "parse_row"]

"""``make_agent``: the downstream agents by name (the wiring; the interface is ``codegrep.downstream.agents``).

Kept apart from the interface so the implementations can import the interface without an import cycle.
"""
from __future__ import annotations

from typing import Any

from codegrep import DownstreamAgent

AGENT_NAMES = ("replay", "openhands", "mini-swe-agent")


def make_agent(name: str, cfg: dict[str, Any] | None = None, endpoint: str | None = None) -> DownstreamAgent:
    """The downstream agent called ``name`` (``replay``, ``openhands``, ``mini-swe-agent``).

    ``cfg`` is the profile's ``downstream`` section; ``endpoint`` overrides the model's base URL.

    >>> make_agent("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown downstream agent 'nope': expected replay, openhands or mini-swe-agent
    """
    cfg = dict(cfg or {})
    if name == "replay":
        return replay_agent(cfg)
    if name == "openhands":
        from codegrep.downstream.openhands import OpenHandsAgent

        return OpenHandsAgent.from_config(cfg, endpoint=endpoint)
    if name in ("mini-swe-agent", "minisweagent", "mini"):
        from codegrep.downstream.mini_swe_agent import MiniSweAgent

        return MiniSweAgent.from_config(cfg, endpoint=endpoint)
    raise ValueError(f"unknown downstream agent {name!r}: expected replay, openhands or mini-swe-agent")


def replay_agent(section: dict[str, Any], seed: int = 0) -> DownstreamAgent:
    """The replay cost model over the traces and parameters of ``downstream.replay`` (``stages.replay_setup``,
    the same set-up notebooks 05 and 06 use)."""
    from codegrep.downstream.replay import ReplayAgent
    from codegrep.downstream.stages import replay_setup

    setup = replay_setup({"downstream": section})
    return ReplayAgent(setup.traces, setup.params, seed=int((section.get("replay") or {}).get("seed", seed)))

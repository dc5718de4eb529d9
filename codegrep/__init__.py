"""CodeGrep: an RL-trained retrieval agent for LLM coding agents (reproducibility bundle).

The moving parts are small protocols; every implementation in the package satisfies one of them.
Value types live beside their implementations (``codegrep.data.tasks.Task``,
``codegrep.env.contract.ToolCall`` / ``ToolResult``, ``codegrep.retrievers.base.Retrieval``, ...).

The root sits below every area: it names (for typing) only the value types of the two layers its protocols are
defined over, the task data (``codegrep.data``) and the tool contract (``codegrep.env``). What a retriever or a
downstream agent returns is described here by the attributes callers read (``Ranking``, ``AgentRun``), never
imported from the area above (``tests/test_import_graph.py`` forbids it, ``TYPE_CHECKING`` included).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:  # value types of the root's own layer only; importing them here would pull modules at import time
    from codegrep.data.tasks import Task
    from codegrep.env.contract import ToolCall, ToolResult

import os as _os

# OpenMP threads that sleep instead of spinning while they wait: on a CPU shared with other jobs (tools, other
# processes) spinning threads made every torch parallel region wait for a descheduled thread (a decode step on
# 2 cores measured ~10x slower). Read once, when torch loads its OpenMP runtime, so it is set before any torch
# import; an explicit OMP_WAIT_POLICY in the environment wins. See docs/training.md ("Threads").
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# litellm (imported by mini-swe-agent) downloads its model price list when it is imported unless told to use the
# copy it ships; the bundle never needs prices (cost tracking is off), and tests and smoke never try the network.
# An online user who wants the fresh list sets LITELLM_LOCAL_MODEL_COST_MAP=False.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from codegrep.quiet import filter_warnings as _filter_warnings  # noqa: E402

_filter_warnings()  # known-harmless warnings only, by message (codegrep.quiet), before any heavy import

__version__ = "0.1.0"
TRAJECTORY_FORMAT = "codegrep-episode-1"  # version tag written into every saved episode


@runtime_checkable
class Policy(Protocol):
    """Maps chat histories to the next assistant message (batched: one string per history)."""

    def generate(self, batch: Sequence[list[dict[str, Any]]]) -> list[str]: ...

    def describe(self) -> dict[str, Any]:
        """Model name, sampling settings, device: recorded in every episode."""
        ...


@runtime_checkable
class ToolEnvironment(Protocol):
    """Read-only grep/glob/read over one repository snapshot; one turn's calls run in parallel."""

    def run_turn(self, calls: Sequence["ToolCall"]) -> list["ToolResult"]: ...

    def close(self) -> None: ...


class Ranking(Protocol):
    """What a retriever returns, as far as its callers read it (each field is documented on the implementation,
    ``codegrep.retrievers.base.Retrieval``, which adds ``reasons`` and ``extra``; listed here by name)."""

    files: list[str]
    rounds: int
    seconds: float
    tokens: int
    tool_calls: int


@runtime_checkable
class Retriever(Protocol):
    """Ranks the files of a checkout for a task's issue text."""

    name: str

    def retrieve(self, task: "Task", checkout: Path) -> Ranking: ...


@runtime_checkable
class BatchRetriever(Retriever, Protocol):
    """A retriever that also runs several tasks at once (the agent: episodes in lock step, one batched generate
    per turn); ``codegrep.retrievers.evaluate.evaluate`` then hands it ``batch_size`` tasks at a time."""

    batch_size: int

    def batch_order(self, task: "Task") -> Any: ...

    def retrieve_batch(self, tasks: Sequence["Task"], checkouts: Sequence[Path]) -> list[Ranking]: ...


class AgentRun(Protocol):
    """What one downstream agent run returns, as far as its callers read it (each field is documented on the
    implementation, ``codegrep.downstream.agents.DownstreamResult``, which adds timing, trajectory and details; by name)."""

    agent: str
    completion_tokens: int | None
    instance_id: str
    prompt_tokens: int | None
    resolved: bool | None
    rounds: int | None


@runtime_checkable
class DownstreamAgent(Protocol):
    """A frozen coding agent (real, or the replay cost model) run with or without candidate files."""

    name: str

    def run(self, task: "Task", candidate_files: Sequence[str] | None) -> AgentRun: ...


@runtime_checkable
class Stage(Protocol):
    """What a notebook calls: its area's stage module (``codegrep.mining.stage``, ``codegrep.env.stage``,
    ``codegrep.rl.training_stage``, ``codegrep.rl.ablation_stage``, ``codegrep.downstream.threshold_stage``,
    ``codegrep.downstream.eval_stage``; ``codegrep.pipeline.STAGES`` maps each notebook to its module).

    A notebook holds its parameters cell, ``cfg = notebook_profile(profile, {...})``, then only calls:
    ``result = stage.run(cfg, out, **params)``; ``stage.figures(result, out, *names)`` where its prose shows them
    (drawn through ``codegrep.plots``, saved by ``out.figure``); ``out.headline(stage.NOTEBOOK,
    **stage.headline(result))`` in its last cell. The headline's keys are spelled once, in ``headline``; the report
    reads them from the file that call writes. A seventh notebook copies one of these modules."""

    NOTEBOOK: str
    """The notebook's name (``01_mining``): its headline file."""

    def run(self, cfg: dict[str, Any], out: Any, **params: Any) -> Any:
        """Compute everything the notebook shows from the resolved profile ``cfg``; save its tables under ``out``."""
        ...

    def figures(self, result: Any, out: Any, *names: str) -> dict[str, Any]:
        """Draw and save the named figures (all when none are named)."""
        ...

    def headline(self, result: Any) -> dict[str, Any]:
        """``Outputs.headline`` keywords: ``numbers``, ``source`` and, where needed, ``sources`` and ``reasons``."""
        ...

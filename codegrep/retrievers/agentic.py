"""``agent``: the LLM retrieval agent (``codegrep.agent.loop.run_episode``) with any policy, as a retriever.

The policy comes from the profile's ``agent:`` section; ``retrievers.agent`` may override its keys
(``model``, ``endpoint``, ``policy``...) and set ``episodes_dir``. Each retrieval saves its episode JSON.
The evaluation harness runs it ``agent.batch_size`` tasks at a time (``retrieve_batch``: episodes in lock step,
one batched generate per turn), the batches notebook 03 evaluates with (``codegrep.rl.policy_rows.agent_rows``).
"""
from __future__ import annotations

import hashlib
import re
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

from codegrep import Policy
from codegrep.data.tasks import Task
from codegrep.retrievers.base import Retrieval

OWN_KEYS = ("episodes_dir",)


def policy_spec(agent: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The ``agent:`` section with overrides; an endpoint implies the openai policy, a model the hf one.

    >>> policy_spec({"policy": "hf", "model": "smollm2"}, {"endpoint": "http://h:1/v1"})["policy"]
    'openai'
    >>> policy_spec({"policy": "openai", "endpoint": "http://h:1/v1"}, {"model": "m"})["policy"]
    'hf'
    >>> policy_spec({"policy": "openai", "endpoint": "http://h:1/v1"}, {"model": "m", "endpoint": "http://x/v1"})["model"]
    'm'
    """
    spec = {**agent, **{k: v for k, v in overrides.items() if v is not None and k not in OWN_KEYS}}
    if overrides.get("endpoint"):
        spec["policy"] = "openai"
    elif overrides.get("model") and "policy" not in overrides:
        spec.update(policy="hf", endpoint=None)
    return spec


class AgentRetriever:
    """Runs one agent episode per task on a tool environment over the checkout."""

    name = "agent"

    def __init__(self, spec: dict[str, Any], env_config: dict[str, Any] | None = None,
                 episodes_dir: str | Path | None = None, policy: Policy | None = None):
        from codegrep.agent.protocol import AgentConfig

        self.spec = spec
        self.agent_config = AgentConfig.from_dict(spec)
        self.env_config = env_config or {}
        self.episodes_dir = Path(episodes_dir) if episodes_dir else None
        self._policy = policy
        self._lock = threading.Lock()

    @classmethod
    def from_profile(cls, cfg: dict[str, Any] | None, settings: dict[str, Any]) -> "AgentRetriever":
        cfg = cfg or {}
        spec = policy_spec(dict(cfg.get("agent") or {}), settings)
        return cls(spec, dict(cfg.get("env") or {}), settings.get("episodes_dir"))

    @property
    def policy(self) -> Policy:
        """Created on first use (loading a model takes seconds to minutes)."""
        with self._lock:
            if self._policy is None:
                from codegrep.agent.policies import make_policy

                self._policy = make_policy(self.spec)
            return self._policy

    def episode_path(self, task: Task) -> Path | None:
        if self.episodes_dir is None:
            return None
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", task.instance_id)
        if safe != task.instance_id:  # `a/b-1` and `a_b-1` would share one file: the raw id's digest tells them apart
            safe += "-" + hashlib.sha1(task.instance_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        return self.episodes_dir / (safe + ".json")

    @property
    def batch_size(self) -> int:
        """Episodes run in lock step, one batched generate per turn (``agent.batch_size``, unset = ``PolicyConfig``'s
        default; 1 = one at a time). ``codegrep.retrievers.evaluate.evaluate`` hands this many tasks at once to
        :meth:`retrieve_batch`."""
        from codegrep.agent.protocol import PolicyConfig

        return max(1, int(self.spec.get("batch_size") or PolicyConfig.batch_size))

    def batch_order(self, task: Task) -> int:
        """Sort key that puts issues of similar visible length in one batch (a batch is padded to its longest
        prompt, and decoding cost grows with it)."""
        from codegrep.agent.protocol import visible_issue

        return len(visible_issue(task.problem_statement, self.agent_config))

    def run_batch(self, tasks: Sequence[Task], envs: Sequence[Any]) -> list[Retrieval]:
        """One lock-step batch of episodes (``codegrep.agent.loop.run_episodes``) on already open tool
        environments, one per task; each episode is saved (``episode_path``) even when the policy raises."""
        from codegrep.agent.loop import run_episodes

        policy = self.policy
        paths = [self.episode_path(t) for t in tasks]
        eps = run_episodes([(t.problem_statement, e) for t, e in zip(tasks, envs)], policy, self.agent_config,
                           ids=[t.instance_id for t in tasks], save_to=paths)
        described = policy.describe()
        return [Retrieval(files=list(ep.files), rounds=ep.rounds, tool_calls=ep.tool_calls, tokens=ep.tokens,
                          seconds=ep.total_s, reasons={f: "submitted by the agent" for f in ep.files},
                          extra={"episode_path": str(path) if path else None, "submitted": ep.submitted,
                                 "format_errors": ep.format_errors, "timings": ep.timings(), "policy": described})
                for ep, path in zip(eps, paths)]

    def retrieve_batch(self, tasks: Sequence[Task], checkouts: Sequence[Path]) -> list[Retrieval]:
        """:meth:`run_batch` on tool environments over the tasks' checkouts (one each)."""
        from codegrep.env.tools import ToolConfig
        from codegrep.env.workdir import RepoToolEnvironment

        tools = ToolConfig.from_dict(self.env_config)
        with ExitStack() as stack:
            envs = [stack.enter_context(RepoToolEnvironment(Path(c), tools)) for c in checkouts]
            return self.run_batch(tasks, envs)

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        """One episode: :meth:`retrieve_batch` of one task."""
        return self.retrieve_batch([task], [checkout])[0]

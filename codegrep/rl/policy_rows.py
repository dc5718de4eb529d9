"""The agent's harness rows on a list of tasks, and what its episodes show about the ranked line.

Shared by notebook 03's evaluation (:mod:`codegrep.rl.training_stage`), the expert-iteration arm and the
training-task benches (:mod:`codegrep.rl.curve`); it imports neither, so they can all import it.
"""
from __future__ import annotations

import json
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from codegrep.quiet import show_bar

def initial_policy_dir(config: dict[str, Any]) -> Path | None:
    """The policy a run started GRPO from (its ``config.json`` ``initial_policy``: the warm start, or the base
    model), or None when the record has none; a relative path from runs written before paths were absolute is read
    against the project root."""
    from codegrep.config import project_root

    initial = config.get("initial_policy")
    if not isinstance(initial, str) or not initial:
        return None
    path = Path(initial)
    return project_root() / path if not path.is_absolute() and not path.exists() else path


TRAINED_POLICIES = ("warm start", "GRPO")
"""The labels :func:`evaluation_rows` gives the warm-started and the GRPO policy (the untrained one is ``untrained``)."""


def agent_rows(cfg: dict[str, Any], model: str | Path, tasks: Sequence[Any], resolver: Any,
               out_path: str | Path, progress: bool = True) -> list[dict[str, Any]]:
    """The agent (``model`` with the profile's ``agent:`` settings) on ``tasks``, one harness row each.

    Episodes run in lock step across instances (one batched ``generate`` per turn for ``agent.batch_size``
    instances of similar issue length, ``codegrep.agent.loop.run_episodes``). Rows already in ``out_path`` are reused; new ones
    are appended as each batch finishes, and episodes are saved beside it.
    """
    from tqdm.auto import tqdm

    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig, open_environment
    from codegrep.retrievers.agentic import AgentRetriever, policy_spec
    from codegrep.retrievers.evaluate import read_rows, score_row

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = read_rows(out_path)
    todo = [t for t in tasks if t.instance_id not in done]
    if todo:
        env_sec = dict(cfg.get("env") or {})
        # the CLI's retriever (``codegrep evaluate --retriever agent``): the same batches, order and rows
        agent = AgentRetriever(policy_spec(dict(cfg.get("agent") or {}), {"model": str(model)}), env_sec,
                               episodes_dir=out_path.with_suffix(""))
        todo = sorted(todo, key=agent.batch_order)
        pool, tools = WorktreePool.from_config(env_sec), ToolConfig.from_dict(env_sec)
        size = agent.batch_size
        bar = tqdm(total=len(todo), desc=f"agent {Path(str(model)).name}", unit="instance", disable=not show_bar(progress))
        with out_path.open("a") as fh:
            for i in range(0, len(todo), size):
                batch = todo[i:i + size]
                with ExitStack() as stack:
                    envs = [stack.enter_context(open_environment(t, resolver, pool, env_sec.get("mode", "worktree"),
                                                                 tools)) for t in batch]
                    retrievals = agent.run_batch(batch, envs)
                for task, retrieval in zip(batch, retrievals):
                    row = score_row(task, retrieval, None, "agent")
                    fh.write(json.dumps(row, default=str) + "\n")
                    fh.flush()
                    done[task.instance_id] = row
                bar.update(len(batch))
        bar.close()
    return [done[t.instance_id] for t in tasks]


def ranked_line_use(messages: Sequence[dict[str, str]], gold: Sequence[str], submitted: Sequence[str]) -> dict[str, bool]:
    r"""How one episode used the ranked line (``Files ranked by this turn's searches: ...``, ``agent.rank_files``):
    whether it submitted first the file a ranked line listed first (the last line shown), whether some ranked line
    put a gold file first (what copying the first path could score), whether a gold file was in any ranked line.

    >>> msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "Issue: x"},
    ...         {"role": "assistant", "content": "grep"},
    ...         {"role": "user", "content": "Files ranked by this turn's searches: b.py, a.py\n..."}]
    >>> ranked_line_use(msgs, ["a.py"], ["b.py"])
    {'submit_first_ranked': True, 'gold_ranked_first': False, 'gold_in_ranked': True}
    """
    from codegrep.agent.protocol import ranked_lines

    lines = [line for m in messages[2:] if m["role"] == "user" for line in ranked_lines(m["content"])]
    gold = set(gold)
    return {"submit_first_ranked": bool(lines and submitted and submitted[0] == lines[-1][0]),
            "gold_ranked_first": any(line and line[0] in gold for line in lines),
            "gold_in_ranked": any(f in gold for line in lines for f in line)}


def ranked_line_numbers(results: dict[str, list[dict[str, Any]]],
                        policies: Sequence[str] = TRAINED_POLICIES) -> dict[str, float]:
    """What bounds the agent's P@1, per policy (shares of its evaluated episodes, :func:`ranked_line_use`):
    ``ranked_submit_first_<policy>`` (it copies the first ranked path), ``ranked_gold_first_<policy>`` (its searches
    put a gold file first: with the copy, this is its P@1), ``ranked_gold_listed_<policy>`` (a gold file was in a
    ranked line at all). ``policies`` are :func:`evaluation_rows`' labels (``warm start`` gives ``..._warm_start``).
    Episodes whose record is missing are left out; a policy without records gives no keys."""
    from codegrep.agent.loop import load_episode

    out: dict[str, float] = {}
    for policy in policies:
        uses = []
        for row in results.get(policy) or []:
            path = (row.get("extra") or {}).get("episode_path")
            if not path or not Path(path).is_file():
                continue
            episode = load_episode(path)
            uses.append(ranked_line_use(episode.get("messages") or [], row.get("gold") or [], row.get("files") or []))
        if uses:
            key = re.sub(r"[^a-z0-9]+", "_", policy.lower())
            for name, field_name in (("submit_first", "submit_first_ranked"), ("gold_first", "gold_ranked_first"),
                                     ("gold_listed", "gold_in_ranked")):
                out[f"ranked_{name}_{key}"] = float(np.mean([u[field_name] for u in uses]))
    return out

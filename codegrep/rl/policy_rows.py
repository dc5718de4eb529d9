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

from codegrep.files import open_append
from codegrep.quiet import show_bar


def evaluation_stamp(cfg: dict[str, Any], run_dir: str | Path) -> dict[str, Any]:
    """What a run's cached agent rows depend on besides the instances: the trained run (its ``done.json``), the
    profile's agent, env and tasks sections and seed (notebook 03's evaluation cache and the training-task check
    key on it)."""
    done = Path(run_dir) / "done.json"
    record = {"run": json.loads(done.read_text()) if done.is_file() else None, "seed": cfg.get("seed"),
              **{k: cfg.get(k) for k in ("agent", "env", "tasks")}}
    return json.loads(json.dumps(record, sort_keys=True, default=str))


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
               out_path: str | Path, progress: bool = True, episodes_dir: str | Path | None = None,
               ) -> list[dict[str, Any]]:
    """The agent (``model`` with the profile's ``agent:`` settings) on ``tasks``, one harness row each.

    Episodes run in lock step across instances (one batched ``generate`` per turn for ``agent.batch_size``
    instances of similar issue length, ``codegrep.agent.loop.run_episodes``). Rows already in ``out_path`` are reused; new ones
    are appended as each batch finishes, and episodes are saved beside it (or in ``episodes_dir``). With
    ``agent.eval_processes`` > 1 the same batches are dealt out to that many processes (:func:`_rows_in_processes`).
    """
    from tqdm.auto import tqdm

    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig, open_environment
    from codegrep.retrievers.agentic import AgentRetriever, policy_spec
    from codegrep.retrievers.evaluate import read_rows, score_row

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    _merge_parts(out_path)  # rows a stopped parallel evaluation left in its parts
    done = read_rows(out_path)
    todo = [t for t in tasks if t.instance_id not in done]
    if todo:
        env_sec = dict(cfg.get("env") or {})
        # the CLI's retriever (``codegrep evaluate --retriever agent``): the same batches, order and rows
        agent = AgentRetriever(policy_spec(dict(cfg.get("agent") or {}), {"model": str(model)}), env_sec,
                               episodes_dir=Path(episodes_dir) if episodes_dir else out_path.with_suffix(""))
        todo = sorted(todo, key=agent.batch_order)
        size = agent.batch_size
        batches = [todo[i:i + size] for i in range(0, len(todo), size)]
        processes = min(eval_processes(cfg, agent.spec), len(batches))
        if processes > 1:
            _rows_in_processes(cfg, model, batches, resolver, out_path, processes, progress,
                               agent.episodes_dir)
            done = read_rows(out_path)
            return [done[t.instance_id] for t in tasks]
        pool, tools = WorktreePool.from_config(env_sec), ToolConfig.from_dict(env_sec)
        bar = tqdm(total=len(todo), desc=f"agent {Path(str(model)).name}", unit="instance", disable=not show_bar(progress))
        with open_append(out_path) as fh:
            for batch in batches:
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


def eval_processes(cfg: dict[str, Any], spec: dict[str, Any] | None = None) -> int:
    """``agent.eval_processes``, or 1 where processes cannot share the work: a policy ``spec`` (the ``agent:``
    section with the model, ``policy_spec``) that is not a local model on the CPU (an endpoint, a scripted policy,
    a GPU device).

    >>> eval_processes({"agent": {"eval_processes": 2}}), eval_processes({"agent": {}})
    (2, 1)
    >>> eval_processes({"agent": {"eval_processes": 2}}, {"policy": "openai", "endpoint": "http://h:1/v1"})
    1
    """
    n = int((cfg.get("agent") or {}).get("eval_processes") or 1)
    if n > 1 and spec is not None:
        if spec.get("endpoint") or spec.get("policy") in ("openai", "scripted"):  # another word names a local model
            return 1
        device = str(spec.get("device") or "auto")
        if device != "cpu":
            import torch

            if device != "auto" or torch.cuda.is_available():
                return 1
    return n


def _part_paths(out_path: Path) -> list[Path]:
    return sorted(out_path.parent.glob(f"{out_path.stem}.part*.jsonl"))


def _merge_parts(out_path: Path) -> None:
    """Append the rows of ``<out>.part<k>.jsonl`` files (a parallel evaluation's shares) to ``out_path`` once, in
    part order, then remove the parts; rows already in ``out_path`` are not written twice."""
    from codegrep.retrievers.evaluate import read_rows

    parts = _part_paths(out_path)
    if not parts:
        return
    have = read_rows(out_path) if out_path.exists() else {}
    with open_append(out_path) as fh:
        for part in parts:
            for iid, row in read_rows(part).items():
                if iid not in have:
                    fh.write(json.dumps(row, default=str) + "\n")
                    have[iid] = row
    for part in parts:
        part.unlink()


def _share(args: tuple) -> int:
    """One process's share of a parallel evaluation (top level, so a spawned process can import it)."""
    cfg, model, tasks, resolver, part, threads, episodes_dir = args
    import torch

    torch.set_num_threads(threads)
    agent = dict(cfg.get("agent") or {}, eval_processes=1, cpu_threads=threads)
    agent_rows({**cfg, "agent": agent}, model, tasks, resolver, part, progress=False, episodes_dir=episodes_dir)
    return len(tasks)


def _rows_in_processes(cfg: dict[str, Any], model: str | Path, batches: list[list[Any]], resolver: Any,
                       out_path: Path, processes: int, progress: bool, episodes_dir: Path | None) -> None:
    """Deal ``batches`` out to ``processes`` spawned processes (batch ``i`` to process ``i mod processes``), each
    running :func:`agent_rows` on its share with ``agent.cpu_threads`` threads (default: the usable cores split
    evenly) and writing ``<out>.part<k>.jsonl``; then write their rows to ``out_path`` in batch order. Each share
    keeps its batches whole and in order, so every batch is decoded as one process would decode it."""
    import multiprocessing
    import os
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    from tqdm.auto import tqdm

    from codegrep.retrievers.evaluate import read_rows

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = int((cfg.get("agent") or {}).get("cpu_threads") or max(1, cores // processes))
    shares = [[t for b in batches[k::processes] for t in b] for k in range(processes)]
    parts = [out_path.with_name(f"{out_path.stem}.part{k}.jsonl") for k in range(processes)]
    total = sum(map(len, shares))
    bar = tqdm(total=total, desc=f"agent {Path(str(model)).name} ({processes} processes)", unit="instance",
               disable=not show_bar(progress))
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as ex:
        futures = [ex.submit(_share, (cfg, str(model), share, resolver, part, threads, episodes_dir))
                   for share, part in zip(shares, parts)]
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=5, return_when=FIRST_EXCEPTION)
            for f in finished:
                f.result()  # a share's error is this call's error (its rows so far stay in its part)
            bar.n = sum(len(read_rows(p)) for p in parts if p.exists())
            bar.refresh()
    bar.close()
    rows = {iid: row for p in parts for iid, row in read_rows(p).items()}
    with open_append(out_path) as fh:
        for batch in batches:
            for task in batch:
                fh.write(json.dumps(rows[task.instance_id], default=str) + "\n")
    for part in parts:
        part.unlink()


def ranked_line_use(messages: Sequence[dict[str, str]], gold: Sequence[str], submitted: Sequence[str]) -> dict[str, bool]:
    r"""How one episode used the ranked line (``Files ranked by this turn's searches: ...``, ``agent.rank_files``):
    whether it submitted first the file a ranked line listed first (the last line shown), whether some ranked line
    put a gold file first (what copying the first path could score), whether a gold file was in any ranked line,
    whether its first file would be gold had it been held to the last ranked line's first (``agent.submit_ranked``;
    with no ranked line shown, its own first file).

    >>> msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "Issue: x"},
    ...         {"role": "assistant", "content": "grep"},
    ...         {"role": "user", "content": "Files ranked by this turn's searches: b.py, a.py\n..."}]
    >>> ranked_line_use(msgs, ["a.py"], ["b.py"])
    {'submit_first_ranked': True, 'gold_ranked_first': False, 'gold_in_ranked': True, 'gold_held_first': False}
    """
    from codegrep.agent.protocol import ranked_lines

    lines = [line for m in messages[2:] if m["role"] == "user" for line in ranked_lines(m["content"])]
    gold = set(gold)
    return {"submit_first_ranked": bool(lines and submitted and submitted[0] == lines[-1][0]),
            "gold_ranked_first": any(line and line[0] in gold for line in lines),
            "gold_in_ranked": any(f in gold for line in lines for f in line),
            "gold_held_first": bool(lines and submitted) and lines[-1][0] in gold
            or bool(not lines and submitted) and submitted[0] in gold}


def ranked_line_numbers(results: dict[str, list[dict[str, Any]]],
                        policies: Sequence[str] = TRAINED_POLICIES) -> dict[str, float]:
    """What bounds the agent's P@1, per policy (shares of its evaluated episodes, :func:`ranked_line_use`):
    ``ranked_submit_first_<policy>`` (it copies the first ranked path), ``ranked_gold_first_<policy>`` (its searches
    put a gold file first: with the copy, this is its P@1), ``ranked_gold_listed_<policy>`` (a gold file was in a
    ranked line at all), ``ranked_held_gold_first_<policy>`` (its P@1 had its first submit been held to the last
    ranked line's first, ``agent.submit_ranked``, the rest of each episode unchanged). ``policies`` are :func:`evaluation_rows`' labels (``warm start`` gives ``..._warm_start``).
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
                                     ("gold_listed", "gold_in_ranked"), ("held_gold_first", "gold_held_first")):
                out[f"ranked_{name}_{key}"] = float(np.mean([u[field_name] for u in uses]))
    return out

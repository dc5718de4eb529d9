"""Scripted strategies a small model could copy, run through the agent's own turn function.

A strategy reads only what the agent is shown: the visible issue (``agent.max_issue_chars``) for its first turn,
and that turn's observation for its submission. It plays the episode through
:func:`codegrep.agent.protocol.apply_turn`, so its P@1 is what a policy that copies it exactly would reach under a
protocol setting: the **ceiling** used to choose the protocol (on TRAINING tasks only), and the expert whose
successful episodes become the warm start's demonstrations (:mod:`codegrep.rl.demos`).

* ``first-listed``: turn 1 greps the first ``terms`` issue terms (the grep heuristic's ``issue_terms`` on the
  visible text: paths as globs, identifiers as word-bounded greps, plain words as stems); turn 2 submits the
  files in the order the observation lists them. Under ``grep_view: files`` that order is "files defining a
  hit first, source before tests, most hits".
* ``oracle-shown``: the same turn 1, then the gold files the observation showed (an upper bound of any policy
  that only copies paths it was shown; uses the answer, so never a demonstration).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from codegrep.agent.protocol import (AgentConfig, apply_turn, call_key, listed_files, relevance_of, tool_call_text,
                                     visible_issue)
from codegrep.env.tools import ToolCall
from codegrep.retrievers.terms import compact_call, expert_terms

STRATEGIES = ("first-listed", "oracle-shown")


@dataclass
class ScriptedEpisode:
    """One scripted episode: the assistant texts, the observation and what was submitted."""

    outputs: list[str]
    """Assistant turn texts (tool calls, then the submit)."""
    observations: list[str]
    """User messages answering the non-final turns (exactly what ``apply_turn`` rendered)."""
    calls: list[ToolCall]
    """Turn 1's calls."""
    submitted: list[str]
    """Files of the submit, best first (``apply_turn``'s normalised list)."""


def first_calls(task_text: str, agent: AgentConfig, terms: int, skip: int = 0) -> list[ToolCall]:
    """Turn 1 of a strategy: the calls (:func:`compact_call`) for terms ``skip .. skip+terms`` of the VISIBLE issue,
    each call once (two words with one stem make one grep: a repeated call would end the turn, ``parse_tool_calls``).

    >>> [c.arguments["pattern"] for c in first_calls("Fix parse_args in cli.py now", AgentConfig(max_issue_chars=14), 3)]
    ['\\\\bparse_args\\\\b']
    >>> [c.arguments["pattern"] for c in first_calls("blueprints and blueprint", AgentConfig(), 3)]
    ['\\\\bblueprint']
    """
    found = expert_terms(visible_issue(task_text, agent), skip + terms)[skip:]
    calls = list({call_key(c): c for c in (compact_call(t, kind) for t, kind in found)}.values())
    return calls[: agent.max_calls_per_turn]


def choose(strategy: str, observation: str, gold: Sequence[str] = (), size: int = 1) -> list[str]:
    """The files a strategy submits after reading ``observation`` (``gold`` only for ``oracle-shown``).

    >>> obs = "grep pattern=\\"f\\"\\nb.py (2 hits, def)\\na.py (1 hit)"
    >>> choose("first-listed", obs, size=2), choose("oracle-shown", obs, ["a.py"])
    (['b.py', 'a.py'], ['a.py'])
    """
    shown = listed_files(observation)
    if strategy == "first-listed":
        return shown[:size]
    if strategy == "oracle-shown":
        return [f for f in shown if f in set(gold)][:size]
    raise ValueError(f"unknown strategy {strategy!r}; expected one of {STRATEGIES}")


def play(strategy: str, task: Any, env: Any, agent: AgentConfig, terms: int = 4, skip: int = 0,
         size: int = 1) -> ScriptedEpisode:
    """Play one two-turn episode of ``strategy`` through ``apply_turn`` on ``env`` (a ``ToolEnvironment``)."""
    calls = first_calls(task.problem_statement, agent, terms, skip) or [ToolCall("glob", {"pattern": "**/*.py"})]
    first = tool_call_text(calls)
    turn1 = apply_turn(first, 1, agent, env.run_turn, task.problem_statement, relevance_of(env))
    observation = turn1.observation or ""
    files = choose(strategy, observation, task.gold_files, size) or ["none"]
    second = tool_call_text([ToolCall("submit", {"files": files})])
    turn2 = apply_turn(second, 2, agent, env.run_turn, task.problem_statement, relevance_of(env))
    return ScriptedEpisode([first, second], [observation], turn1.calls, list(turn2.submit or []))


def ceiling(tasks: Sequence[Any], resolver: Any, pool: Any, agents: dict[str, AgentConfig],
            strategies: Sequence[tuple[str, int, int]] = (("first-listed", 4, 1), ("oracle-shown", 4, 1)),
            env_mode: str = "objects", tool_config: Any = None) -> list[dict[str, Any]]:
    """P@1 (and hit@size) each ``(strategy, terms, size)`` reaches under each named protocol setting, one row
    per (setting, strategy) with ``n`` tasks. Run on TRAINING tasks only: the protocol is chosen by it."""
    from codegrep.env.tools import open_environment

    hits: dict[tuple[str, str], list[float]] = {}
    for task in tasks:
        gold = set(task.gold_files)
        with open_environment(task, resolver, pool, env_mode, tool_config) as env:
            for setting, agent in agents.items():
                for name, terms, size in strategies:
                    ep = play(name, task, env, agent, terms=terms, size=size)
                    label = f"{name} ({terms} terms" + (f", submit {size})" if size > 1 else ")")
                    hits.setdefault((setting, label), []).append(
                        float(bool(ep.submitted) and ep.submitted[0] in gold))
    return [{"setting": s, "strategy": k, "n": len(v), "p_at_1": sum(v) / len(v)} for (s, k), v in hits.items()]


def protocol_settings(agent: AgentConfig) -> dict[str, AgentConfig]:
    """The protocol settings the ceiling compares: the profile's, the paper's tools on the same issue text, and
    the smoke protocol before issue 27 (600 issue characters, 192 tokens split evenly, ``path:line:text`` greps)."""
    from dataclasses import replace

    paper = replace(agent, grep_view="lines", rank_files=0, max_call_tokens=None)
    before = replace(paper, max_issue_chars=600, max_observation_tokens=192)
    return {"profile": agent, "paper tools, same issue text": paper, "smoke before issue 27": before}


def profile_ceiling(cfg: dict[str, Any], n: int = 40, seed: int = 0, baseline: bool = True) -> list[dict[str, Any]]:
    """:func:`ceiling` on a seeded ``n`` of the profile's whole TRAIN split (half real issues where both kinds are there), under
    :func:`protocol_settings`; with ``baseline``, the grep heuristic's P@1 on the same tasks as a last row."""
    import random

    from codegrep.config import section
    from codegrep.data.tasks import whole_split_tasks
    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig

    from codegrep.data.default_set import task_kind

    tasks, resolver = whole_split_tasks(cfg)  # the whole split, as the demonstrations see it
    if not tasks:  # the baseline's P@1 was a ZeroDivisionError
        from codegrep.config import where
        from codegrep.errors import UserError

        raise UserError(f"{where(cfg, 'tasks')}: the train split has no task for the ceiling to play (a task of "
                        "the eval split's pool never reaches train)")
    rng = random.Random(seed)
    real = [t for t in tasks if task_kind(t.repo) == "real"]
    other = [t for t in tasks if task_kind(t.repo) == "docstring"]
    k = min(len(real), max(n // 2, n - len(other)))  # half real where both kinds are there, else all of one
    chosen = rng.sample(real, k) + rng.sample(other, min(len(other), n - k))
    env = section(cfg, "env")
    pool, tools = WorktreePool.from_config(env), ToolConfig.from_dict(env)
    agent = AgentConfig.from_dict(cfg.get("agent"), "agent")
    rows = ceiling(chosen, resolver, pool, protocol_settings(agent),
                   strategies=(("first-listed", 4, 1), ("first-listed", 6, 1), ("oracle-shown", 6, 1)),
                   env_mode=env.get("mode", "objects"), tool_config=tools)
    if baseline:
        from codegrep.retrievers.registry import make_retriever

        heuristic = make_retriever("grep-heuristic", cfg)
        hits = []
        for task in chosen:
            with pool.acquire(resolver.resolve(task.repo, task.base_commit), task.base_commit) as path:
                files = heuristic.retrieve(task, path).files
            hits.append(float(bool(files) and files[0] in set(task.gold_files)))
        rows.append({"setting": "(no protocol)", "strategy": "grep heuristic (baseline)", "n": len(hits),
                     "p_at_1": sum(hits) / len(hits)})
    for row in rows:
        row["n_real"] = k
    return rows


def ceiling_table(rows: list[dict[str, Any]]) -> Any:
    """The ceiling rows as a table: one row per strategy, one column per protocol setting (P@1; NaN where a
    strategy was not run under a setting: show it with ``.style.format(na_rep="n/a")``), and n."""
    import pandas as pd

    df = pd.DataFrame(rows)
    table = df.pivot_table(index="strategy", columns="setting", values="p_at_1", sort=False).round(3)
    table["n (real)"] = [f"{int(df[df.strategy == s].n.iloc[0])} ({int(df.n_real.iloc[0])})" for s in table.index]
    return table

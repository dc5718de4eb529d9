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

import re
from dataclasses import dataclass
from typing import Any, Sequence

from codegrep.agent.protocol import (AgentConfig, apply_turn, call_term, listed_files, tool_call_text,
                                     visible_issue)
from codegrep.env.tools import ToolCall
from codegrep.retrievers.heuristic import issue_terms, term_call

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


def compact_call(term: str, kind: str) -> ToolCall:
    """The short form of the heuristic's call for one term, easier for a small model to write: the literal
    identifier (no anchors), the crude stem of a plain word case-insensitively, a glob for a file name.

    >>> [compact_call(*t).arguments for t in [("parse_args", "ident"), ("monitors", "word"), ("cli.py", "path")]]
    [{'pattern': 'parse_args'}, {'pattern': 'monitor', 'ignore_case': True}, {'pattern': '**/cli.py'}]
    """
    call = term_call(term, kind)
    if kind == "path":
        return call
    literal = call_term(call)
    pattern = re.escape(literal) if re.escape(literal) != literal else literal  # a dotted name stays escaped
    return ToolCall("grep", {"pattern": pattern, **({"ignore_case": True} if kind == "word" else {})})


_CALLED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]{2,})\(")
_COMMON_CALLS = frozenset("print len str int float list dict set tuple range type isinstance repr super".split())


def expert_terms(text: str, n: int) -> list[tuple[str, str]]:
    """The heuristic's ``issue_terms`` with one fix: a name written as a call (``trigsimp(f)``) is an identifier,
    not a plain word (builtins left out), so code names come before English words.

    >>> expert_terms("simplifying exponential -> trig identities: trigsimp(f) and print(x)", 3)
    [('trigsimp', 'ident'), ('exponential', 'word'), ('simplifying', 'word')]
    """
    base = issue_terms(text, max(n, 8) + 8)
    called = list(dict.fromkeys(m for m in _CALLED.findall(text) if m not in _COMMON_CALLS))
    kinds = {t: ("ident" if t in called and k == "word" else k) for t, k in base}
    for name in called:
        kinds.setdefault(name, "ident")
    rank = {"path": 0, "ident": 1, "word": 2}
    order = {t: i for i, (t, _) in enumerate(base)}
    return sorted(kinds.items(), key=lambda tk: (rank[tk[1]], order.get(tk[0], len(order))))[:n]


def first_calls(task_text: str, agent: AgentConfig, terms: int, skip: int = 0, compact: bool = True) -> list[ToolCall]:
    """Turn 1 of a strategy: the calls for issue terms ``skip .. skip+terms`` of the VISIBLE issue
    (:func:`compact_call` forms, or the heuristic's own ``term_call`` with ``compact=False``).

    >>> [c.arguments["pattern"] for c in first_calls("Fix parse_args in cli.py now", AgentConfig(max_issue_chars=14), 3)]
    ['parse_args']
    """
    found = expert_terms(visible_issue(task_text, agent), skip + terms)[skip:]
    make = compact_call if compact else term_call
    return [make(t, kind) for t, kind in found][: agent.max_calls_per_turn]


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
         size: int = 1, compact: bool = True) -> ScriptedEpisode:
    """Play one two-turn episode of ``strategy`` through ``apply_turn`` on ``env`` (a ``ToolEnvironment``)."""
    calls = first_calls(task.problem_statement, agent, terms, skip, compact) or [ToolCall("glob", {"pattern": "**/*.py"})]
    first = tool_call_text(calls)
    turn1 = apply_turn(first, 1, agent, env.run_turn)
    observation = turn1.observation or ""
    files = choose(strategy, observation, task.gold_files, size) or ["none"]
    second = tool_call_text([ToolCall("submit", {"files": files})])
    turn2 = apply_turn(second, 2, agent, env.run_turn)
    return ScriptedEpisode([first, second], [observation], turn1.calls, list(turn2.submit or []))


def ceiling(tasks: Sequence[Any], resolver: Any, pool: Any, agents: dict[str, AgentConfig],
            strategies: Sequence[tuple[str, int, int]] = (("first-listed", 4, 1), ("oracle-shown", 4, 1)),
            compact: Sequence[bool] = (True,),
            env_mode: str = "objects", tool_config: Any = None) -> list[dict[str, Any]]:
    """P@1 (and hit@size) each ``(strategy, terms, size)`` reaches under each named protocol setting, one row
    per (setting, strategy) with ``n`` tasks. Run on TRAINING tasks only: the protocol is chosen by it."""
    from codegrep.env.tools import open_environment

    hits: dict[tuple[str, str], list[float]] = {}
    for task in tasks:
        gold = set(task.gold_files)
        with open_environment(task, resolver, pool, env_mode, tool_config) as env:
            for setting, agent in agents.items():
                for (name, terms, size), short in ((s, c) for s in strategies for c in compact):
                    ep = play(name, task, env, agent, terms=terms, size=size, compact=short)
                    label = f"{name} ({terms} terms{'' if short else ', heuristic calls'})"
                    hits.setdefault((setting, label), []).append(
                        float(bool(ep.submitted) and ep.submitted[0] in gold))
    return [{"setting": s, "strategy": k, "n": len(v), "p_at_1": sum(v) / len(v)} for (s, k), v in hits.items()]

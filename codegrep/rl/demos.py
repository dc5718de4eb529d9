"""The warm start's demonstrations, in the agent's tool-call format (chat ``messages``), from three sources:

* ``synthetic``: **scripted-expert episodes on the profile's TRAIN split** (:mod:`codegrep.retrievers.scripted`,
  strategy ``first-listed``), played through the agent's own turn function, so every observation is exactly the
  one the policy will see. Turn 1 greps terms of the VISIBLE issue; turn 2 submits the file the observation lists
  first. **Rejection sampled**: an episode is kept only when its first submitted file is a gold file, that file
  was shown in an observation, and every pattern is in the visible issue (:func:`rejection_reason`). Several
  variants per task (how many terms, which ones), tasks in a seeded order. Not a model's output: labelled
  ``synthetic`` wherever used.
* ``recorded``: real mini-swe-agent runs converted by :mod:`codegrep.mining.run_converter`, kept only where the
  discovery steps are (:func:`discovery_kept`: every path read and the first file submitted were shown by an
  observation or named in the visible issue); runs on evaluation instances are never read.
* ``catm``: demonstrations mined by the CATM stage (``codegrep.mining.catm``).

Besides the sources, a warm start may add **first-turn demonstrations** (``first_turn_demos``,
:func:`first_turn_demonstrations`): the scripted expert's FIRST turn only (its greps for the visible issue's terms)
on shipped SWE-bench rows of repositories the evaluation split never uses. The expert's first turn depends on the
issue text alone, so these need no repository snapshot; they teach the choice of search terms on hundreds of real
issues where the full episodes (which need a snapshot) have only the 55 of the Lite sympy pool.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from codegrep.agent.protocol import (AgentConfig, build_messages, call_term, listed_files, parse_tool_calls,
                                     tool_call_text, visible_issue)
from codegrep.data.tasks import Task
from codegrep.env.tools import ToolCall

SOURCES = ("synthetic", "recorded", "catm")
VARIANTS = ((6, 0), (4, 0), (3, 1), (2, 0), (2, 2), (1, 0))
"""Expert variants ``(terms, skip)``: grep ``terms`` issue terms starting after the first ``skip``."""
PER_TASK = 2
"""Demonstrations kept per task at most (more tasks, fewer near-copies)."""


def rejection_reason(calls: Sequence[ToolCall], observation: str, submitted: Sequence[str], gold: Sequence[str],
                     visible: str) -> str | None:
    r"""Why a scripted episode may not be a demonstration (None = keep it).

    >>> calls = [ToolCall("grep", {"pattern": r"\bfoo\b"})]
    >>> rejection_reason(calls, "a.py (1 hit)", ["a.py"], ["a.py"], "call foo twice")
    >>> rejection_reason(calls, "a.py (1 hit)", ["b.py"], ["b.py"], "call foo twice")
    'first submitted file not shown in an observation'
    >>> rejection_reason(calls, "a.py (1 hit)", ["a.py"], ["b.py"], "call foo twice")
    'first submitted file is not gold'
    >>> rejection_reason(calls, "a.py (1 hit)", ["a.py"], ["a.py"], "no such word")
    "pattern 'foo' is not in the visible issue"
    """
    low = visible.lower()
    for call in calls:
        term = call_term(call)
        if term.lower() not in low:
            return f"pattern {term!r} is not in the visible issue"
    if not submitted or submitted[0] not in set(gold):
        return "first submitted file is not gold"
    if submitted[0] not in listed_files(observation):
        return "first submitted file not shown in an observation"
    return None


def expert_messages(task: Task, agent: AgentConfig, outputs: Sequence[str], observations: Sequence[str]) -> list[dict]:
    """The chat of a scripted episode: opening prompt, then assistant turns and the observations between them."""
    messages = build_messages(task.problem_statement, agent)
    for i, text in enumerate(outputs):
        messages.append({"role": "assistant", "content": text})
        if i < len(observations):
            messages.append({"role": "user", "content": observations[i]})
    return messages


def task_order(tasks: Sequence[Task], seed: int = 0) -> list[Task]:
    """Tasks in a seeded order, repositories interleaved (never the source order, which is grouped by repository).

    >>> ts = [Task(f"a{i}", "o/a", "c" * 40, "x") for i in range(3)] + [Task("b0", "o/b", "c" * 40, "x")]
    >>> [t.repo for t in task_order(ts)][:2]
    ['o/a', 'o/b']
    """
    by_repo: dict[str, list[Task]] = {}
    for task in tasks:
        by_repo.setdefault(task.repo, []).append(task)
    rng = random.Random(seed)
    lists = []
    for repo in sorted(by_repo):
        group = list(by_repo[repo])
        rng.shuffle(group)
        lists.append(group)
    return [g[i] for i in range(max(map(len, lists), default=0)) for g in lists if i < len(g)]


def expert_task_demos(task: Task, env: Any, agent: AgentConfig, variants: Sequence[tuple[int, int]] = VARIANTS,
                      counts: dict[str, int] | None = None, per_task: int = PER_TASK,
                      choice: str = "first-listed") -> list[list[dict[str, str]]]:
    """The kept (distinct, rejection-sampled) scripted-expert episodes of one task, as chats (``per_task`` at most);
    ``choice`` is the strategy that picks the submitted file (``first-listed`` or the hindsight ``oracle-shown``)."""
    from codegrep.retrievers.scripted import play

    counts = counts if counts is not None else {}
    visible = visible_issue(task.problem_statement, agent)
    seen: set[str] = set()
    out = []
    for terms, skip in variants:
        if len(out) >= per_task:
            break
        ep = play(choice, task, env, agent, terms=terms, skip=skip, size=1)
        if not ep.calls or ep.outputs[0] in seen:
            continue
        seen.add(ep.outputs[0])
        reason = rejection_reason(ep.calls, ep.observations[0], ep.submitted, task.gold_files, visible)
        counts[reason or "kept"] = counts.get(reason or "kept", 0) + 1
        if reason is None:
            out.append(expert_messages(task, agent, ep.outputs, ep.observations))
    return out


def expert_demonstrations(tasks: Sequence[Task], resolver: Any, pool: Any, agent: AgentConfig, *,
                          variants: Sequence[tuple[int, int]] = VARIANTS, limit: int | None = None, seed: int = 0,
                          env_mode: str = "objects", tool_config: Any = None,
                          counts: dict[str, int] | None = None, choice: str = "first-listed") -> list[dict[str, Any]]:
    """Rejection-sampled scripted-expert demonstrations (``{"source", "instance_id", "messages"}``), tasks in a
    seeded order (:func:`task_order`), every variant of a task in turn, until ``limit`` are kept. ``counts`` (when
    given) receives the number of episodes per outcome (``kept`` or the rejection reason); ``choice`` as in
    :func:`expert_task_demos`."""
    from codegrep.env.tools import open_environment

    demos: list[dict[str, Any]] = []
    for task in task_order(tasks, seed):
        if limit and len(demos) >= limit:
            break
        with open_environment(task, resolver, pool, env_mode, tool_config) as env:
            demos += [{"source": "synthetic", "instance_id": task.instance_id, "messages": m}
                      for m in expert_task_demos(task, env, agent, variants, counts, choice=choice)]
    return demos[:limit] if limit else demos


def patch_mentions(calls: Sequence[ToolCall], patch: str) -> bool:
    r"""Whether one of the calls' terms occurs in a reference patch (its paths, hunk headers, context or changed
    lines; case-insensitive): the first-turn demonstrations' rejection test, since without the repository the
    greps cannot be run.

    >>> patch = "diff --git a/pkg/cli.py b/pkg/cli.py\n@@ -3,2 +3,2 @@ def parse_args(argv):\n-    x\n+    y"
    >>> patch_mentions([ToolCall("grep", {"pattern": r"\bparse_args\b"})], patch)
    True
    >>> patch_mentions([ToolCall("grep", {"pattern": r"\bmonitor", "ignore_case": True})], patch)
    False
    """
    low = patch.lower()
    return any(term and term.lower() in low for term in map(call_term, calls))


def first_turn_demonstrations(rows: Sequence[dict[str, Any]], agent: AgentConfig, *, limit: int, seed: int = 0,
                              exclude_ids: set[str] = frozenset(), exclude_repos: set[str] = frozenset(),
                              terms: int = 6, counts: dict[str, int] | None = None) -> list[dict[str, Any]]:
    r"""Turn-1-only demonstrations (``{"source": "first-turn", "instance_id", "messages"}``): the opening prompt and
    the scripted expert's first turn (:func:`codegrep.retrievers.scripted.first_calls`, ``terms`` terms of the
    VISIBLE issue, the variant without skips: one rule, the one the full demonstrations start with) on SWE-bench
    rows, repositories interleaved in a seeded order (:func:`task_order`), until ``limit`` are kept. Rows of
    ``exclude_repos`` (the evaluation's repositories) and ``exclude_ids`` are never read. **Rejection sampled**: a
    row is kept only when one of its terms occurs in the row's reference patch (:func:`patch_mentions`). ``counts``
    receives the number of rows per outcome.

    >>> rows = [{"instance_id": "o__a-1", "repo": "o/a", "base_commit": "c" * 40, "problem_statement":
    ...          "parse_args() fails", "patch": "@@ def parse_args(argv):"},
    ...         {"instance_id": "o__b-2", "repo": "o/b", "base_commit": "c" * 40, "problem_statement":
    ...          "render_page() fails", "patch": "@@ def other():"}]
    >>> counts = {}
    >>> demos = first_turn_demonstrations(rows, AgentConfig(), limit=5, counts=counts)
    >>> [d["instance_id"] for d in demos], [m["role"] for m in demos[0]["messages"]], counts
    (['o__a-1'], ['system', 'user', 'assistant'], {'kept': 1, 'no term in the reference patch': 1})
    >>> first_turn_demonstrations(rows, AgentConfig(), limit=5, exclude_repos={"o/a"})
    []
    """
    from codegrep.retrievers.scripted import first_calls

    counts = counts if counts is not None else {}
    tasks = [Task(r["instance_id"], r["repo"], r["base_commit"], r["problem_statement"], patch=r.get("patch", ""))
             for r in rows if r["repo"] not in exclude_repos and r["instance_id"] not in exclude_ids]
    out: list[dict[str, Any]] = []
    for task in task_order(list({t.instance_id: t for t in tasks}.values()), seed):
        if len(out) >= limit:
            break
        calls = first_calls(task.problem_statement, agent, terms)
        reason = ("no term in the visible issue" if not calls else
                  None if patch_mentions(calls, task.patch or "") else "no term in the reference patch")
        counts[reason or "kept"] = counts.get(reason or "kept", 0) + 1
        if reason is None:
            out.append({"source": "first-turn", "instance_id": task.instance_id, "messages":
                        build_messages(task.problem_statement, agent)
                        + [{"role": "assistant", "content": tool_call_text(calls)}]})
    return out


def discovery_kept(messages: Sequence[dict[str, str]], agent: AgentConfig | None = None) -> bool:
    """Whether a converted run keeps its discovery: every path it reads (or greps inside) and the first file it
    submits were shown by an earlier observation or named in the issue text of the prompt.

    >>> m = [{"role": "system", "content": ""}, {"role": "user", "content": "Issue: bug"},
    ...      {"role": "assistant", "content": '<tool_call>{"name": "read", "arguments": {"path": "a/b.py"}}</tool_call>'}]
    >>> discovery_kept(m + [{"role": "user", "content": "1 x"}, {"role": "assistant",
    ...     "content": '<tool_call>{"name": "submit", "arguments": {"files": ["a/b.py"]}}</tool_call>'}])
    False
    >>> m[1]["content"] = "Issue: bug in a/b.py"
    >>> discovery_kept(m + [{"role": "user", "content": "1 x"}, {"role": "assistant",
    ...     "content": '<tool_call>{"name": "submit", "arguments": {"files": ["a/b.py"]}}</tool_call>'}])
    True
    """
    issue = next((m["content"] for m in messages if m["role"] == "user"), "")
    shown: set[str] = set()
    first_user = True
    for m in messages:
        if m["role"] == "user":
            if not first_user:
                shown.update(listed_files(m["content"]))
            first_user = False
        elif m["role"] == "assistant":
            turn = parse_tool_calls(m["content"])
            for call in turn.calls:
                path = call.arguments.get("path")
                if path and path not in shown and path not in issue:
                    return False
            if turn.submit is not None:
                first = turn.submit[0] if turn.submit else ""
                return bool(first) and (first in shown or first in issue)
    return False


def catm_demonstrations(cfg: dict[str, Any], artifacts: Path) -> list[dict[str, Any]]:
    """Demonstrations mined by CATM for the profile (``codegrep.mining.catm.mine_profile``), with their ids."""
    from codegrep.artifacts import Outputs
    from codegrep.mining.catm import mine_profile

    result = mine_profile(cfg, Outputs(artifacts, artifacts / "figures"))
    path = Path(result.demonstrations_path)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{"source": "catm", "instance_id": r.get("instance_id", "") if isinstance(r, dict) else "",
             "messages": r["messages"] if isinstance(r, dict) else r} for r in rows]


def recorded_demonstrations(cg: Any, cfg: dict[str, Any], agent: AgentConfig,
                            exclude: set[str]) -> list[dict[str, Any]]:
    """Real recorded runs as demonstrations (``codegrep.mining.run_converter``), only those whose discovery steps are
    kept (:func:`discovery_kept`); ``exclude`` runs are never read."""
    from codegrep.data.shipped import trajectory_dirs
    from codegrep.env.tools import ToolConfig
    from codegrep.mining.run_converter import ConvertConfig, recorded_demonstrations as convert

    demos, _ = convert(cg.recorded_runs or trajectory_dirs(), agent, exclude=exclude,
                       config=ConvertConfig(max_calls=cg.recorded_max_calls),
                       tools=ToolConfig.from_dict(cfg.get("env")))
    return [{"source": "recorded", "instance_id": d["instance_id"], "messages": d["messages"]} for d in demos
            if discovery_kept(d["messages"])]


def mix(groups: dict[str, list[dict[str, Any]]], limit: int | None) -> list[dict[str, Any]]:
    """All demonstrations, or ``limit`` of them taken from the sources in turn (equal shares while they last).

    >>> mix({"a": [1, 2, 3], "b": [9]}, 3), mix({"a": [1, 2]}, None)
    ([1, 9, 2], [1, 2])
    """
    lists = [list(v) for v in groups.values()]
    if not limit:
        return [d for v in lists for d in v]
    out: list[Any] = []
    for i in range(max((len(v) for v in lists), default=0)):
        out += [v[i] for v in lists if i < len(v)]
    return out[:limit]

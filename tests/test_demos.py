"""Scripted-expert demonstrations, the choosing-shaped tool output and the rank reward (issue 27).

Each builder test would have caught a bug of the old synthetic builder (``rl/sft.py`` before issue 27): grep
patterns taken from the part of the issue the prompt does not show, the gold file submitted although no
observation showed it, long English words grepped before identifiers, and a first-N source-order sample.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from codegrep.agent.protocol import AgentConfig, apply_turn, listed_files, parse_tool_calls, shape_result
from codegrep.data.tasks import Task
from codegrep.env.tools import RepoToolEnvironment, ToolCall, ToolResult
from codegrep.retrievers.scripted import first_calls, play
from codegrep.rl.demos import discovery_kept, expert_task_demos, rejection_reason, task_order
from codegrep.rl.rewards import rank_credit, score_episode
from conftest import commit_all


@pytest.fixture()
def env(tmp_path: Path):
    root = tmp_path / "repo"
    commit_all(root, {
        "pkg/config.py": "def parse_config(text):\n    return text.strip()\n",
        "pkg/cli.py": "from pkg.config import parse_config\nparse_config(' x ')\n",
        "pkg/render.py": "def render_table(rows):\n    return rows\n",
        "pkg/tests/test_config.py": "from pkg.config import parse_config\n" + "assert parse_config('a')\n" * 5,
        "docs/a_usage.rst": "parse_config(text)\n" * 9})
    environment = RepoToolEnvironment(root)
    yield environment
    environment.close()


AGENT = AgentConfig(max_turns=3, max_issue_chars=60, max_observation_tokens=256, grep_view="files",
                    max_call_tokens=48, rank_files=3)


def test_files_view_puts_the_defining_source_file_first_and_docs_last(env):
    call = ToolCall("grep", {"pattern": "parse_config"})
    shown = shape_result(call, env.run_turn([call])[0], "files").output.splitlines()
    assert shown[0].startswith("pkg/config.py (") and "def" in shown[0]
    assert shown.index(next(s for s in shown if s.startswith("pkg/cli.py"))) < \
        shown.index(next(s for s in shown if s.startswith("pkg/tests/")))  # source before tests
    assert shown[-1].startswith("docs/a_usage.rst")  # 9 hits, but not source: last
    raw = env.run_turn([call])[0].output
    assert raw.splitlines()[0].startswith("docs/a_usage.rst")  # the paper's view: path order


def test_per_call_cap_leaves_later_calls_their_share():
    # one huge result and one small one: with the even split both get half; with a per-call cap the small
    # call keeps its whole output and the huge one is cut at the cap
    def run(calls):
        return [ToolResult("grep", True, "x.py:1:" + "a" * 2000), ToolResult("grep", True, "y.py:1:b")]

    out = apply_turn("".join(f'<tool_call>{{"name": "grep", "arguments": {{"pattern": "{p}"}}}}</tool_call>'
                             for p in "ab"), 1, AgentConfig(max_observation_tokens=100, max_call_tokens=20), run)
    first = out.observation.split("</tool_response>")[0]
    assert "truncated" in first and len(first) < 20 * 4 + 120 and "y.py:1:b" in out.observation


def test_ranked_line_heads_the_observation_and_is_what_the_copier_submits(env):
    task = Task("t-1", "o/r", "c" * 40, "parse_config breaks on None in render_table", gold_files=["pkg/config.py"])
    ep = play("first-listed", task, env, AGENT, terms=2)
    assert ep.observations[0].startswith("Files ranked by this turn's searches: ")
    assert ep.submitted == listed_files(ep.observations[0])[:1]


def test_first_calls_grep_identifiers_before_english_words():
    # sympy-11870 style: the old builder grepped 'exponential' and 'corollary' (long words) first
    text = "simplifying exponential -> trig identities corollary: f = 1 / 2 * (-I*exp(I*k) + I*exp(-I*k)) trigsimp(f)"
    patterns = [c.arguments["pattern"] for c in first_calls(text, AgentConfig(max_issue_chars=1000), 2)]
    assert patterns == [r"\btrigsimp\b", r"\bexp\b"]


def test_patterns_come_only_from_the_visible_issue(env):
    hidden = "x" * 70 + " render_table"  # the identifier lies past max_issue_chars = 60
    task = Task("t-2", "o/r", "c" * 40, "parse_config crash. " + hidden, gold_files=["pkg/render.py"])
    counts: dict[str, int] = {}
    demos = expert_task_demos(task, env, AGENT, counts=counts)
    for demo in demos:
        calls = parse_tool_calls(demo[2]["content"]).calls
        assert all("render_table" not in json.dumps(c.arguments) for c in calls)
    assert not demos  # render.py is never found from the visible part, so nothing may be kept
    calls = [ToolCall("grep", {"pattern": "render_table"})]
    assert rejection_reason(calls, "pkg/render.py (1 hit, def)", ["pkg/render.py"], ["pkg/render.py"],
                            task.problem_statement[:60]).startswith("pattern")


def test_gold_is_submitted_only_when_an_observation_showed_it(env):
    task = Task("t-3", "o/r", "c" * 40, "parse_config crashes on None", gold_files=["pkg/config.py"])
    demos = expert_task_demos(task, env, AGENT)
    assert demos, "the expert finds the defining file from the visible identifier"
    for demo in demos:
        submit = parse_tool_calls(demo[-1]["content"]).submit
        assert submit[0] == "pkg/config.py" and submit[0] in listed_files(demo[3]["content"])
        assert demo[3]["content"] == apply_turn(demo[2]["content"], 1, AGENT, env.run_turn).observation
    assert rejection_reason([], "pkg/cli.py (1 hit)", ["pkg/config.py"], ["pkg/config.py"], "x") == \
        "first submitted file not shown in an observation"


def test_hindsight_choice_submits_a_shown_gold_file_the_first_listed_rule_misses(env):
    # gold is pkg/cli.py: the grep for parse_config shows it, but ranks the defining pkg/config.py first
    task = Task("t-4", "o/r", "c" * 40, "parse_config crashes on None", gold_files=["pkg/cli.py"])
    counts: dict[str, int] = {}
    assert expert_task_demos(task, env, AGENT, counts=counts) == []  # the copier's first file is not gold
    assert counts.get("first submitted file is not gold")
    demos = expert_task_demos(task, env, AGENT, choice="oracle-shown")
    assert demos
    for demo in demos:
        shown = listed_files(demo[3]["content"])
        assert parse_tool_calls(demo[-1]["content"]).submit[:1] == ["pkg/cli.py"] and shown[0] != "pkg/cli.py"
    with pytest.raises(ValueError, match="unknown strategy 'gold'"):
        expert_task_demos(task, env, AGENT, choice="gold")


def test_task_order_is_seeded_and_mixes_repositories_not_first_n():
    tasks = [Task(f"p{i}", "o/pytest", "c" * 40, "x") for i in range(20)] + \
            [Task(f"s{i}", "sympy/sympy", "c" * 40, "x") for i in range(5)]
    first = task_order(tasks, seed=0)[:8]
    assert {t.repo for t in first} == {"o/pytest", "sympy/sympy"}
    assert [t.instance_id for t in task_order(tasks, 0)] == [t.instance_id for t in task_order(tasks, 0)]
    assert [t.instance_id for t in task_order(tasks, 0)] != [t.instance_id for t in task_order(tasks, 1)]


def test_recorded_run_that_names_its_target_before_any_observation_is_dropped():
    read = '<tool_call>{"name": "read", "arguments": {"path": "pkg/core.py"}}</tool_call>'
    submit = '<tool_call>{"name": "submit", "arguments": {"files": ["pkg/core.py"]}}</tool_call>'
    grep = '<tool_call>{"name": "grep", "arguments": {"pattern": "frob"}}</tool_call>'
    head = [{"role": "system", "content": ""}, {"role": "user", "content": "Issue:\nfrob fails"}]
    jumped = head + [{"role": "assistant", "content": read}, {"role": "user", "content": "1 code"},
                     {"role": "assistant", "content": submit}]
    found = head + [{"role": "assistant", "content": grep}, {"role": "user", "content": "pkg/core.py:3:def frob"},
                    {"role": "assistant", "content": read}, {"role": "user", "content": "1 code"},
                    {"role": "assistant", "content": submit}]
    assert not discovery_kept(jumped) and discovery_kept(found)


def test_rank_credit_moves_where_f_beta_is_flat():
    # every rollout misses: F-beta ties at 0, the rank credit still separates searching well from not
    assert rank_credit(["b.py"], ["a.py"], shown=["a.py"]) > rank_credit(["b.py"], ["a.py"], shown=[])
    assert rank_credit(["b.py", "a.py"], ["a.py"]) == 0.5
    s = score_episode(["b.py"], ["a.py"], rounds=2, tool_calls=2, tokens=50, parse_errors=0, reward="rank",
                      shown=["a.py"])
    assert s.f_beta == 0 and s.retrieval == 0.25
    with pytest.raises(ValueError, match="retrieval reward"):
        score_episode(["b.py"], ["a.py"], rounds=1, tool_calls=0, tokens=1, parse_errors=0, reward="mrr")


def test_agent_config_rejects_an_unknown_grep_view():
    with pytest.raises(ValueError, match="grep_view"):
        AgentConfig(grep_view="counts")


def test_synthetic_demonstrations_come_from_the_task_kinds_in_order(monkeypatch):
    """``task_kinds``: real-issue tasks are played first and fill ``sft_max_demos`` before any docstring
    task; a kind left out is never played; evaluation instances never are."""
    import codegrep.data.tasks as tasks_mod
    from codegrep.rl import demos as build
    from codegrep.rl.training_run import demonstrations
    from codegrep.rl.trainer import CodeGrepArgs

    pool = [Task(f"doc{i}", "codegrep-default/pkg", "c" * 40, "text") for i in range(4)] + \
        [Task(f"real{i}", "sympy/sympy", "c" * 40, "text") for i in range(3)] + [Task("evalx", "sympy/sympy", "c" * 40, "t")]
    monkeypatch.setattr(tasks_mod, "profile_tasks", lambda cfg, split, limit=None: (pool, None))
    played: list[list[str]] = []

    def fake(tasks, resolver, pool_, agent, *, limit=None, **kw):
        played.append([t.instance_id for t in tasks])
        return [{"source": "synthetic", "instance_id": t.instance_id, "messages": []} for t in tasks][:limit]

    monkeypatch.setattr(build, "expert_demonstrations", fake)
    cfg = {"tasks": {"splits": {"train": {}}}}
    cg = CodeGrepArgs(profile="ci", sft_max_demos=5, task_kinds=["real", "docstring"])
    got = [d["instance_id"] for d in demonstrations(cg, cfg, [], None, None, AGENT, {}, None, exclude={"evalx"})]
    assert played == [["real0", "real1", "real2"], ["doc0", "doc1", "doc2", "doc3"]]
    assert got == ["real0", "real1", "real2", "doc0", "doc1"]
    played.clear()
    cg = CodeGrepArgs(profile="ci", sft_max_demos=None, task_kinds=["real"])
    assert [d["instance_id"] for d in demonstrations(cg, cfg, [], None, None, AGENT, {}, None, exclude=set())] == \
        ["real0", "real1", "real2", "evalx"]
    with pytest.raises(ValueError, match="task_kinds"):
        CodeGrepArgs(profile="ci", task_kinds=["english"])


def test_demos_curve_holds_out_real_train_tasks_and_never_evaluation_ones(monkeypatch):
    """``codegrep bench demos``: the dev tasks are real train tasks, disjoint from the pool the sizes draw from,
    seeded; docstring tasks and evaluation instances are in neither."""
    import codegrep.data.tasks as tasks_mod
    import codegrep.rl.training_run as run_mod
    from codegrep.rl.curve import real_train_split

    pool = [Task(f"doc{i}", "codegrep-default/pkg", "c" * 40, "t") for i in range(3)] + \
        [Task(f"sympy-{i:02d}", "sympy/sympy", "c" * 40, "t") for i in range(12)]
    monkeypatch.setattr(tasks_mod, "profile_tasks", lambda cfg, split, limit=None: (pool, "resolver"))
    monkeypatch.setattr(run_mod, "evaluation_ids_of", lambda cfg: {"sympy-03"})
    train, dev, resolver = real_train_split({"tasks": {}}, dev=4, seed=0)
    ids, dev_ids = [t.instance_id for t in train], [t.instance_id for t in dev]
    assert len(dev_ids) == 4 and len(ids) == 7 and not set(ids) & set(dev_ids)
    assert all(i.startswith("sympy-") and i != "sympy-03" for i in ids + dev_ids)
    again = real_train_split({"tasks": {}}, dev=4, seed=0)
    assert [t.instance_id for t in again[0]] == ids and resolver == "resolver"
    assert [t.instance_id for t in real_train_split({"tasks": {}}, dev=4, seed=1)[1]] != dev_ids
    with pytest.raises(ValueError, match="--dev"):
        real_train_split({"tasks": {}}, dev=11, seed=0)


def test_bench_demos_figure_shows_each_point_and_the_expert_line():
    import matplotlib

    matplotlib.use("Agg")
    from codegrep.rl.curve import demos_figure

    doc = {"profile": "smoke", "seed": 0, "dev_ids": [f"d{i}" for i in range(15)], "expert_p_at_1": 0.4,
           "points": [{"n_tasks": 10, "n_demos": 8, "p_at_1": 0.2, "p_at_1_ci95": [0.07, 0.45]},
                      {"n_tasks": 20, "n_demos": 0, "note": "no demonstration kept"},
                      {"n_tasks": 40, "n_demos": 36, "p_at_1": 0.267, "p_at_1_ci95": [0.11, 0.52]}]}
    ax = demos_figure(doc).axes[0]
    xs = list(ax.lines[0].get_xdata())
    assert xs == [10, 40]  # the point without demonstrations is not drawn as a zero
    assert any(list(line.get_ydata()) == [0.4, 0.4] for line in ax.lines)  # the expert's P@1
    assert "SMALL: 15 dev tasks" in ax.get_title()


def test_first_turn_demonstrations_on_the_shipped_rows_stay_away_from_the_evaluation():
    """``first_turn_demos`` on the smoke profile: the added turn-1 demonstrations come from shipped SWE-bench rows of
    repositories the evaluation split never uses (never sympy/astropy, never an evaluation id); each is the
    expert's first turn on the visible issue (every pattern in it), keeps a term of the row's reference patch,
    and is a prompt plus one assistant turn of tool calls; repositories are interleaved."""
    from codegrep.config import load_profile
    from codegrep.data.shipped import lite_rows_path, verified_rows_path
    from codegrep.data.sources import read_rows
    from codegrep.data.tasks import evaluation_instance_ids, evaluation_repos
    from codegrep.rl.demos import patch_mentions
    from codegrep.rl.training_run import first_turn
    from codegrep.rl.trainer import CodeGrepArgs

    cfg = load_profile("smoke")
    agent = AgentConfig.from_dict(cfg["agent"])
    eval_ids, eval_repos = evaluation_instance_ids(cfg), evaluation_repos(cfg)
    assert eval_repos == {"sympy/sympy", "astropy/astropy"} and len(eval_ids) == 86
    assert first_turn(CodeGrepArgs(profile="smoke"), cfg, agent, eval_ids) == []  # 0 = none
    demos = first_turn(CodeGrepArgs(profile="smoke", first_turn_demos=30), cfg, agent, eval_ids)
    rows = {r["instance_id"]: r for r in read_rows(verified_rows_path()) + read_rows(lite_rows_path())}
    assert len(demos) == 30 and len({d["instance_id"] for d in demos}) == 30
    assert len({rows[d["instance_id"]]["repo"] for d in demos}) == 10  # interleaved: every other repository
    for d in demos:
        row = rows[d["instance_id"]]
        assert d["source"] == "first-turn" and row["repo"] not in eval_repos and d["instance_id"] not in eval_ids
        assert [m["role"] for m in d["messages"]] == ["system", "user", "assistant"]
        turn = parse_tool_calls(d["messages"][-1]["content"])
        assert turn.calls and turn.submit is None and not turn.errors
        assert turn.calls == first_calls(row["problem_statement"], agent, 6)
        assert patch_mentions(turn.calls, row["patch"])

"""Retrievers on a slice of the default task set (metrics re-derived by hand from each row), the CLI, and
``profile_evaluation``."""
from __future__ import annotations

import json

import pytest

from codegrep.cli import main
from codegrep.retrievers.evaluate import MACRO_KEYS, evaluate, read_rows
from codegrep.retrievers.registry import make_retriever
from test_retrievers import ISSUES, cache, tiny_repo, tiny_tasks  # noqa: F401 (fixtures)

N_TASKS = 16


@pytest.fixture(scope="module")
def default_slice():
    """The first eval-split tasks of the default set (built once into the real cache) and their resolver."""
    from codegrep.data.default_set import ensure_default_task_set
    from codegrep.data.repos import RepoResolver
    from codegrep.data.tasks import load_tasks

    built = ensure_default_task_set()
    tasks = [t for t in load_tasks(built.tasks_path) if t.extra.get("split") == "eval"]
    return tasks[:N_TASKS], RepoResolver(repos_dir=built.repos_dir, offline=True), built


def by_hand(row: dict) -> dict:
    """Set and rank metrics straight from a row's lists (an independent re-derivation)."""
    files, ranked, gold = row["files"], row["ranked"], set(row["gold"])
    hit = len(gold & set(files))
    first = next((i for i, f in enumerate(ranked, 1) if f in gold), None)
    return {"precision": hit / len(files) if files else 0.0, "recall": hit / len(gold),
            "acc@1": float(bool(ranked) and ranked[0] in gold), "acc@5": float(first is not None and first <= 5),
            "mrr": 1 / first if first else 0.0}


@pytest.mark.parametrize("name", ["bm25", "grep-heuristic", "random", "oracle"])
def test_default_slice_metrics_agree_with_rows(name, default_slice, cache, tmp_path):
    from codegrep.env.pool import WorktreePool

    tasks, resolver, _ = default_slice
    out = tmp_path / f"{name}.jsonl"
    k = None if name == "oracle" else 3
    macro = evaluate(tasks, resolver, make_retriever(name), out, k=k, pool=WorktreePool(), progress=False)
    rows = list(read_rows(out).values())
    assert macro["n"] == len(rows) == len(tasks) and list(macro) == list(MACRO_KEYS)
    for key in ("precision", "recall", "acc@1", "acc@5", "mrr"):
        assert macro[key] == pytest.approx(sum(by_hand(r)[key] for r in rows) / len(rows)), key
    assert all(len(r["files"]) <= 3 for r in rows) if k else True
    if name == "oracle":
        assert macro["precision"] == macro["recall"] == macro["acc@1"] == 1.0
    if name == "grep-heuristic":
        assert macro["mean_rounds"] == 2 and macro["mean_tool_calls"] > 2


def test_bm25_beats_random_on_the_default_slice(default_slice, cache, tmp_path):
    from codegrep.env.pool import WorktreePool

    tasks, resolver, _ = default_slice
    pool = WorktreePool()
    bm25 = evaluate(tasks, resolver, make_retriever("bm25"), tmp_path / "b.jsonl", k=5, pool=pool, progress=False)
    rnd = evaluate(tasks, resolver, make_retriever("random"), tmp_path / "r.jsonl", k=5, pool=pool, progress=False)
    assert bm25["acc@5"] > rnd["acc@5"] + 0.2, (bm25, rnd)


def test_cli_retrieve_live_tree_and_commit(cache, tiny_repo, capsys):
    repos, commit = tiny_repo
    issue = ISSUES["pkg/parser.py"]
    assert main(["retrieve", "--repo", str(repos / "local__tiny"), "--retriever", "bm25", "--k", "2", issue]) == 0
    assert capsys.readouterr().out.splitlines() == ["pkg/parser.py", "pkg/__init__.py"]
    argv = ["retrieve", "--repo", str(repos / "local__tiny"), "--commit", commit, "--retriever", "grep-heuristic",
            "--json", issue]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    # the profiles set read_top: 0 (no read turn): one grep turn
    assert result["files"][0] == "pkg/parser.py" and result["rounds"] == 1 and result["tool_calls"] > 0
    assert main(["retrieve", "--repo", str(repos / "local__tiny"), "--commit", "f" * 40,
                 "--retriever", "bm25", issue]) == 2
    assert "not a commit" in capsys.readouterr().err
    # nothing matched: no output line (as grep), exit 0, and stderr says why the ranking is empty
    assert main(["retrieve", "--repo", str(repos / "local__tiny"), "--retriever", "bm25", "zzyzx qqxv"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no file of" in captured.err and "that bm25 indexes" in captured.err


def test_cli_retrieve_in_a_subdirectory_at_a_commit_is_that_subdirectory(cache, tiny_repo, capsys):
    """--repo REPO/pkg ranks pkg's files, relative to pkg, on the live tree; with --commit it ranked the whole
    repository's worktree (paths relative to its root), silently widening the search."""
    repos, commit = tiny_repo
    sub = str(repos / "local__tiny" / "pkg")
    issue = ISSUES["pkg/parser.py"]
    assert main(["retrieve", "--repo", sub, "--retriever", "bm25", issue]) == 0
    live = capsys.readouterr().out.splitlines()
    assert main(["retrieve", "--repo", sub, "--commit", commit, "--retriever", "bm25", issue]) == 0
    at_commit = capsys.readouterr().out.splitlines()
    assert live[0] == "parser.py" and at_commit == live


def test_cli_evaluate_prints_macro_metrics_last(cache, tiny_repo, tmp_path, capsys):
    repos, commit = tiny_repo
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tiny_tasks(commit)))
    argv = ["evaluate", "--tasks", str(tasks_path), "--repos", str(repos), "--retriever", "bm25", "--k", "1",
            "--out", str(tmp_path / "res.jsonl"), "--profile", "ci"]
    assert main(argv) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(metrics) == [*MACRO_KEYS, "retriever", "k", "reused", "recomputed", "new"] and metrics["n"] == 3 and metrics["acc@1"] == 1.0
    assert metrics["k"] == 1 and metrics["p@1"] == 1.0 and metrics["p@2"] == 0.5
    assert metrics["precision"] == 1.0 and metrics["mean_files"] == 1.0
    argv[argv.index("bm25")] = "oracle"  # another retriever into the same file is refused, not mixed
    assert main(argv) == 2 and "holds results of retriever" in capsys.readouterr().err


def test_cli_evaluate_checks_out_in_the_profiles_worktree_pool(cache, tiny_repo, tmp_path, capsys):
    """``codegrep evaluate --profile P`` checks tasks out in P's pool (``env.pool_root``, ``max_worktrees``), as the
    notebooks do; it once used the class defaults (32 under the cache), so a pass over more commits evicted and
    re-made worktrees, and a pool_root set for disk space was ignored."""
    from codegrep.config import cache_dir

    repos, commit = tiny_repo
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tiny_tasks(commit)))
    root = tmp_path / "my_pool"
    (tmp_path / "p.yaml").write_text(f"env: {{pool_root: {root}, max_worktrees: 4}}\n")
    assert main(["evaluate", "--tasks", str(tasks_path), "--repos", str(repos), "--retriever", "bm25",
                 "--out", str(tmp_path / "res.jsonl"), "--profile", str(tmp_path / "p.yaml")]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["n"] == 3
    assert len(list(root.glob("*.ready"))) == 1  # the three tasks share one commit
    assert not list((cache_dir() / "worktrees").glob("*.ready"))


def test_cli_evaluate_set_applies_a_setting_and_reruns_rows_made_without_it(cache, tiny_repo, tmp_path, capsys):
    """``codegrep evaluate --set KEY=VALUE``: a profile setting for one evaluation without writing a profile file
    (the ceiling, the agent's benchmarks and ``retrieve`` read ``--set`` the same way). A row made under other
    settings is not reused (its fingerprint differs); the same settings reuse it."""
    repos, commit = tiny_repo
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tiny_tasks(commit)))
    out = tmp_path / "res.jsonl"

    def run(*sets: str) -> dict:
        argv = ["evaluate", "--tasks", str(tasks_path), "--repos", str(repos), "--retriever", "bm25", "--out", str(out),
                "--profile", "ci"]
        assert main(argv + [a for s in sets for a in ("--set", s)]) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    assert run()["new"] == 3
    first = {i: r["fingerprint"] for i, r in read_rows(out).items()}
    changed = run("retrievers.bm25.path_weight=0", "retrievers.k=1")
    assert changed["recomputed"] == 3 and changed["k"] == 1  # the retriever's setting and the profile's set size
    assert all(r["fingerprint"] != first[i] and r["k"] == 1 for i, r in read_rows(out).items())
    assert run("retrievers.bm25.path_weight=0", "retrievers.k=1")["reused"] == 3


def test_cli_evaluate_of_the_agent_saves_each_episode_beside_the_results(cache, tiny_repo, tmp_path, capsys,
                                                                        monkeypatch):
    """``codegrep evaluate --retriever agent`` wrote ``episode_path: null``: what the agent searched, saw and
    submitted on each instance was lost (notebook 03 keeps them); now one JSON per instance beside ``--out``."""
    from codegrep.agent.policies import ScriptedPolicy
    from codegrep.retrievers import registry
    from codegrep.retrievers.agentic import AgentRetriever

    repos, commit = tiny_repo
    tasks = tiny_tasks(commit)
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    turn = ('<tool_call>{"name": "grep", "arguments": {"pattern": "def "}}</tool_call>',
            '<tool_call>{"name": "submit", "arguments": {"files": ["pkg/parser.py"]}}</tool_call>')
    monkeypatch.setattr(registry, "make_retriever", lambda name, cfg, **kw: AgentRetriever(
        {"policy": "scripted", "batch_size": 1}, {}, policy=ScriptedPolicy(list(turn) * len(tasks))))
    out = tmp_path / "runs" / "agent.jsonl"
    assert main(["evaluate", "--tasks", str(tasks_path), "--repos", str(repos), "--retriever", "agent",
                 "--out", str(out), "--profile", "ci"]) == 0, capsys.readouterr().err
    rows = read_rows(out)
    saved = sorted((tmp_path / "runs" / "agent.episodes").glob("*.json"))
    assert [p.stem for p in saved] == sorted(t.instance_id for t in tasks)
    assert all(r["extra"]["episode_path"] == str(out.with_name("agent.episodes") / f"{i}.json") for i, r in rows.items())
    assert "def " in saved[0].read_text() and "pkg/parser.py" in saved[0].read_text()


def test_cli_compare_pairs_evaluate_results_on_their_shared_instances(cache, tiny_repo, tmp_path, capsys):
    """``codegrep compare``: the paired table of several ``evaluate`` results (notebook 05's, for any task set)."""
    repos, commit = tiny_repo
    tasks = tiny_tasks(commit)
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    for name in ("oracle", "random"):
        assert main(["evaluate", "--tasks", str(tasks_path), "--repos", str(repos), "--retriever", name,
                     "--out", str(tmp_path / f"{name}.jsonl"), "--profile", "ci"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "random.jsonl").read_text().splitlines()]
    (tmp_path / "random.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))  # one instance fewer
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "oracle.jsonl"), str(tmp_path / "random.jsonl"), "--json",
                 "--out", str(tmp_path / "cmp.json"), "--boot", "200"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result == json.loads((tmp_path / "cmp.json").read_text())
    assert result["reference"] == "oracle" and result["n_instances"] == len(tasks) - 1
    assert result["left_out"] == {"oracle": 1} and "left out" in err
    by = {r["retriever"]: r for r in result["rows"]}
    p_random = sum(r["p@1"] for r in rows[:-1]) / (len(tasks) - 1)
    assert by["oracle"]["p@1"] == 1.0 and by["random"]["p@1"] == pytest.approx(p_random)
    assert by["random"]["p@1_diff"] == pytest.approx(p_random - 1.0)
    assert by["random"]["p@1_diff_lo"] <= by["random"]["p@1_diff"] <= by["random"]["p@1_diff_hi"]
    assert main(["compare", str(tmp_path / "random.jsonl"), str(tmp_path / "oracle.jsonl")]) == 0
    text = capsys.readouterr().out
    assert "diff = retriever - random" in text and "oracle" in text.splitlines()[-1]
    # two runs of one retriever: each named by its file (was: the first by the retriever, so "random" and "seed1"
    # read as two different retrievers)
    for stem in ("seed0", "seed1"):
        (tmp_path / f"{stem}.jsonl").write_text((tmp_path / "random.jsonl").read_text())
    assert main(["compare", str(tmp_path / "oracle.jsonl"), str(tmp_path / "seed0.jsonl"),
                 str(tmp_path / "seed1.jsonl"), "--json", "--boot", "50"]) == 0
    assert [r["retriever"] for r in json.loads(capsys.readouterr().out)["rows"]] == ["oracle", "seed0", "seed1"]


def test_cli_compare_reads_how_an_agent_used_its_ranked_line_from_its_moved_episodes(cache, tiny_repo, tmp_path,
                                                                                    capsys, monkeypatch):
    """An agent's results copied elsewhere with their ``.episodes/`` folder still give its ranked-line shares."""
    import shutil

    from codegrep.agent.policies import ScriptedPolicy
    from codegrep.retrievers import registry
    from codegrep.retrievers.agentic import AgentRetriever

    repos, commit = tiny_repo
    tasks = tiny_tasks(commit)
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    assert main(["evaluate", "--tasks", str(tasks_path), "--repos", str(repos), "--retriever", "oracle",
                 "--out", str(tmp_path / "oracle.jsonl"), "--profile", "ci"]) == 0
    turn = ('<tool_call>{"name": "grep", "arguments": {"pattern": "def "}}</tool_call>',
            '<tool_call>{"name": "submit", "arguments": {"files": ["pkg/parser.py"]}}</tool_call>')
    monkeypatch.setattr(registry, "make_retriever", lambda name, cfg, **kw: AgentRetriever(
        {"policy": "scripted", "batch_size": 1, "rank_files": 3}, {}, policy=ScriptedPolicy(list(turn) * len(tasks))))
    assert main(["evaluate", "--tasks", str(tasks_path), "--repos", str(repos), "--retriever", "agent",
                 "--out", str(tmp_path / "run" / "agent.jsonl"), "--profile", "ci"]) == 0
    shutil.move(tmp_path / "run", tmp_path / "moved")
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "oracle.jsonl"), str(tmp_path / "moved" / "agent.jsonl"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["ranked_line"]) == {"ranked_submit_first_agent", "ranked_gold_first_agent",
                                          "ranked_gold_listed_agent", "ranked_held_gold_first_agent"}
    assert 0 < result["ranked_line"]["ranked_gold_listed_agent"] <= 1


def test_profile_evaluation_caches_rows(default_slice, cache, tmp_path):
    from codegrep.config import load_profile
    from codegrep.retrievers.evaluate import profile_evaluation

    built = default_slice[2]  # the tasks file itself, so the tmp cache does not rebuild the default set
    where = {"tasks.splits.eval.source": str(built.tasks_path), "tasks.repos_dir": str(built.repos_dir),
             "tasks.splits.eval.limit": 6, "tasks.splits.eval.instance_ids": None}
    cfg = load_profile("ci", where)
    df, summary = profile_evaluation(cfg, "bm25", out=tmp_path)
    assert len(df) == summary["n"] == 6 and summary["k"] == cfg["retrievers"]["k"]
    assert (tmp_path / "eval" / "bm25.jsonl").is_file() and len(summary["acc_curve"]) == 20
    assert summary["acc_curve"][0] == pytest.approx(summary["acc@1"])
    df2, summary2 = profile_evaluation(cfg, "bm25", out=tmp_path)  # served from the file
    assert summary2["acc@1"] == summary["acc@1"] and list(df2["instance_id"]) == list(df["instance_id"])
    changed = load_profile("ci", {**where, "retrievers.bm25.path_weight": 0})
    profile_evaluation(changed, "bm25", out=tmp_path)
    assert (tmp_path / "eval" / "bm25.stale.jsonl").is_file()  # other settings: old rows moved aside

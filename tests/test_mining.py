"""CATM end to end: records vs gold, resolution layouts, corrupt rows, CLI, demonstrations, --repos, cache."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from codegrep.agent.protocol import parse_tool_calls
from codegrep.cli import main
from codegrep.data.tasks import Task
from codegrep.mining.catm import aggregate, mine, mine_profile
from codegrep.mining.inputs import embedded_dir, open_text
from codegrep.mining.runner import MineOptions, mine_files
from conftest import git_out as _git

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.shared
def test_targets_match_gold_on_resolved_real_runs():
    verified = SHARED / "swebench_verified.jsonl"
    if not verified.is_file():
        pytest.skip("../shared/data/swebench_verified.jsonl absent")
    recs = [r for r in mine([SHARED / "trajectories" / "mini-swe-agent"], tasks=str(verified)) if r.resolved]
    assert len(recs) >= 8
    from codegrep.metrics import precision_recall

    pr = [precision_recall(r.target_files, r.gold_files) for r in recs]
    precision, recall = (sum(x[i] for x in pr) / len(pr) for i in (0, 1))
    assert precision >= 0.9 and recall >= 0.9, (precision, recall)
    # the raw patch carried leftovers on some runs; targets must not
    assert all(set(r.target_files) <= set(r.patch_files) for r in recs)


def test_report_json_layouts(tmp_path):
    src = embedded_dir() / "mini-swe-agent" / "sympy__sympy-16886.traj.json.gz"
    with open_text(src) as fh:
        row = json.load(fh)
    iid = row["instance_id"]
    for layout, report in [("keyed", {iid: {"resolved": False}}), ("inner", {"resolved": True})]:
        d = tmp_path / layout
        d.mkdir()
        (d / f"{iid}.traj.json").write_text(json.dumps(row))
        (d / f"{iid}.report.json").write_text(json.dumps(report))
        [rec] = list(mine([d]))
        assert rec.resolved is (layout == "inner")


def test_cli_streams_records_and_counts_corrupt_rows(tmp_path, capsys):
    with open_text(embedded_dir() / "format-samples" / "adp_nebius_SWE-agent-trajectories.sample_raw.json.gz") as fh:
        rows = json.load(fh)
    data = tmp_path / "in.jsonl"
    lines = [json.dumps(r) for r in rows[:2]] + ['{"truncated": ', json.dumps({"no": "format"}), json.dumps(rows[2])]
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["mine", str(data), "--out", str(out), "--workers", "1"]) == 0
    stats = _last_json(capsys)
    assert stats["read"] == 5 and stats["parsed"] == 3 and stats["records"] == 3
    assert stats["failed"] == {"invalid-json": 1, "unrecognised-format": 1}
    assert any(f.startswith(f"{data}:3:") for f in stats["failures"])
    assert any(f.startswith(f"{data}:4:") for f in stats["failures"])
    assert stats["formats"] == {"nebius-swe-agent": 3} and stats["trajectories_per_s"] > 0
    assert len(out.read_text().splitlines()) == 3


def test_cli_embedded_with_tasks_and_parallel_workers(tmp_path, capsys):
    out = tmp_path / "rec.jsonl"
    assert main(["mine", "embedded", "--tasks", "embedded", "--out", str(out), "--workers", "2"]) == 0
    stats = _last_json(capsys)
    assert stats["parsed"] == stats["read"] == 33 and not stats["failed"]
    assert stats["matched"] == 15 and set(stats["formats"]) == {
        "mini-swe-agent", "swe-gym-openhands", "swe-smith", "nebius-swe-agent", "swe-agent"}
    assert stats["gold"]["precision"] >= 0.9 and stats["gold"]["recall"] >= 0.9
    demos = [json.loads(line) for line in open(tmp_path / "rec.demos.jsonl")]
    assert len(demos) == stats["demonstrations"] == stats["useful"]
    for demo in demos:
        msgs = demo["messages"]
        assert [m["role"] for m in msgs[:2]] == ["system", "user"] and msgs[-1]["role"] == "assistant"
        turns = [parse_tool_calls(m["content"]) for m in msgs if m["role"] == "assistant"]
        assert all(not t.errors for t in turns), [t.errors for t in turns]
        assert turns[-1].submit == demo["target_files"] and len(turns) <= 4
        assert all(len(t.calls) <= 8 for t in turns)


def test_unknown_input_and_offline_hub_id(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="not found"):
        list(mine([tmp_path / "missing.jsonl"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="offline"):
        list(mine(["nebius/SWE-agent-trajectories"]))


def test_a_run_without_its_issue_text_gives_no_demonstration(tmp_path, capsys):
    """A run whose messages are missing (a dataset that dropped them, a run that crashed before its first call) has
    no issue text; a demonstration of it was an episode whose issue is empty ("Issue:\\n\\n") that submits the fix's
    files: a warm start would learn to answer nothing. Its diff and verdict made its record useful; with no step it
    is not (nothing the run did led to the fix)."""
    f = "pkg/a.py"
    patch = f"diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-a\n+b\n"
    traj = {"trajectory_format": "mini-swe-agent-1", "instance_id": "acme__pkg-1", "info": {"submission": patch},
            "messages": []}
    (tmp_path / "acme__pkg-1.traj.json").write_text(json.dumps(traj))
    (tmp_path / "acme__pkg-1.report.json").write_text(json.dumps({"acme__pkg-1": {"resolved": True}}))
    out, demos = tmp_path / "r.jsonl", tmp_path / "d.jsonl"
    assert main(["mine", str(tmp_path / "acme__pkg-1.traj.json"), "--out", str(out), "--demonstrations",
                 str(demos)]) == 0
    stats = _last_json(capsys)
    assert stats["records"] == 1 and stats["useful"] == 0 and stats["demonstrations"] == 0
    assert demos.read_text() == ""


def test_test_files_of_a_go_and_typescript_run_are_not_targets(tmp_path):
    """A run on a repository other than the shipped Python five: ``*_test.go`` and ``*.spec.ts`` in its diff are
    tests (excluded), as the project's one test rule says, ``go.mod`` and ``package.json`` build configuration
    (as ``setup.py`` is); only ``auth/token.go`` supervises a retriever."""
    files = ["auth/token.go", "auth/token_test.go", "web/src/cart.spec.ts", "web/src/cart.test.js", "go.mod",
             "package.json"]
    patch = "".join(f"diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-a\n+b\n" for f in files)
    traj = {"trajectory_format": "mini-swe-agent-1", "instance_id": "acme__gosvc-7", "info": {"submission": patch},
            "messages": [{"role": "user", "content": "<pr_description>expired tokens pass</pr_description>"},
                         {"role": "assistant", "content": "```bash\ncat auth/token.go\n```"},
                         {"role": "assistant", "content": "```bash\nsed -i 's/a/b/' auth/token.go\n```"}]}
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "acme__gosvc-7.traj.json").write_text(json.dumps(traj))
    (tmp_path / "t" / "acme__gosvc-7.report.json").write_text(json.dumps({"acme__gosvc-7": {"resolved": True}}))
    (rec,) = mine([tmp_path / "t"])
    assert rec.repo == "acme/gosvc" and rec.patch_files == files
    assert rec.target_files == ["auth/token.go"]
    assert rec.excluded_files == {**{f: "test" for f in files[1:4]}, "go.mod": "build", "package.json": "build"}


def test_test_data_and_nested_manifests_of_other_languages_are_not_targets(tmp_path):
    """Go's ``testdata/`` golden files and Jest's ``__snapshots__/`` are test material, and a monorepo's or a Rust
    workspace's manifests (``packages/ui/package.json``, ``crates/core/Cargo.toml``, a Go submodule's ``go.mod``)
    are build configuration as the top-level ones are: they were mined as target files of the fix."""
    files = ["internal/parse/dates.go", "internal/parse/testdata/dates.golden",
             "web/src/__snapshots__/Cart.test.tsx.snap", "packages/ui/package.json", "crates/core/Cargo.toml",
             "tools/gen/go.mod"]
    patch = "".join(f"diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-a\n+b\n" for f in files)
    traj = {"trajectory_format": "mini-swe-agent-1", "instance_id": "acme__gosvc-8", "info": {"submission": patch},
            "messages": [{"role": "user", "content": "<pr_description>dates parse wrong</pr_description>"},
                         {"role": "assistant", "content": "```bash\ncat internal/parse/dates.go\n```"},
                         {"role": "assistant", "content": "```bash\nsed -i 's/a/b/' internal/parse/dates.go\n```"}]}
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "acme__gosvc-8.traj.json").write_text(json.dumps(traj))
    (tmp_path / "t" / "acme__gosvc-8.report.json").write_text(json.dumps({"acme__gosvc-8": {"resolved": True}}))
    (rec,) = mine([tmp_path / "t"])
    assert rec.target_files == ["internal/parse/dates.go"]
    assert rec.excluded_files == {**{f: "test" for f in files[1:3]}, **{f: "build" for f in files[3:]}}


def test_repos_without_the_runs_repository_is_counted_not_silent(tmp_path):
    """--repos holding other repositories (the sympy/astropy snapshots, runs on django): the records are not
    checked and their demonstrations are placeholders; the stats say how many, instead of a paths_exist_fraction
    that reads as if it covered them all."""
    (tmp_path / "repos").mkdir()
    patch = "diff --git a/gadgets/core.py b/gadgets/core.py\n--- a/gadgets/core.py\n+++ b/gadgets/core.py\n"
    task = Task("acme__gadgets-1", "acme/gadgets", "a" * 40, "spin returns 1", patch=patch)
    traj = {"trajectory_format": "mini-swe-agent-1", "instance_id": task.instance_id, "info": {"submission": patch},
            "messages": [{"role": "user", "content": "<pr_description>spin</pr_description>"},
                         {"role": "assistant", "content": "```bash\ncat gadgets/core.py\n```"},
                         {"role": "assistant", "content": "```bash\nsed -i 's/1/2/' gadgets/core.py\n```"}]}
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "acme__gadgets-1.traj.json").write_text(json.dumps(traj))
    (tmp_path / "t" / "acme__gadgets-1.report.json").write_text(json.dumps({task.instance_id: {"resolved": True}}))
    stats = mine_files([str(tmp_path / "t")], tmp_path / "r.jsonl", tmp_path / "d.jsonl",
                       MineOptions(tasks={task.instance_id: task}, repos=str(tmp_path / "repos")), progress=False)
    assert stats["matched"] == stats["useful"] == 1 and "paths_exist_fraction" not in stats
    assert stats["repos_unavailable"] == 1
    assert json.loads((tmp_path / "d.jsonl").read_text())["observations"] == "placeholder"


def test_repos_check_paths_and_replay_demonstration_calls(tmp_path):
    repo = tmp_path / "repos" / "acme__widgets"
    (repo / "widgets").mkdir(parents=True)
    (repo / "widgets" / "core.py").write_text("def spin():\n    return 1\n")
    (repo / "widgets" / "util.py").write_text("X = 2\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    commit = _git(repo, "rev-parse", "HEAD")
    patch = "diff --git a/widgets/core.py b/widgets/core.py\n--- a/widgets/core.py\n+++ b/widgets/core.py\n"
    task = Task("acme__widgets-1", "acme/widgets", commit, "spin returns 1", patch=patch)
    turns = ["```bash\ngrep -rn 'def spin' widgets/\n```", "```bash\nnl -ba widgets/core.py | sed -n '1,2p'\n```",
             "```bash\ncat widgets/gone.py\n```", "```bash\nsed -i 's/1/2/' widgets/core.py\n```"]
    traj = {"trajectory_format": "mini-swe-agent-1", "instance_id": task.instance_id,
            "info": {"submission": patch}, "messages": [{"role": "user", "content": "<pr_description>spin</pr_description>"}]
            + [{"role": "assistant", "content": t} for t in turns]}
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "acme__widgets-1.traj.json").write_text(json.dumps(traj))
    (tmp_path / "t" / "acme__widgets-1.report.json").write_text(json.dumps({task.instance_id: {"resolved": True}}))
    stats = mine_files([str(tmp_path / "t")], tmp_path / "r.jsonl", tmp_path / "d.jsonl",
                       MineOptions(tasks={task.instance_id: task}, repos=str(tmp_path / "repos")), progress=False)
    assert stats["paths_exist_fraction"] == pytest.approx(1 / 2)  # core.py exists, gone.py does not
    assert stats["repos_unavailable"] == 0
    demo = json.loads((tmp_path / "d.jsonl").read_text())
    assert demo["observations"] == "repository"
    observations = " ".join(m["content"] for m in demo["messages"] if m["role"] == "user")
    assert "return 1" in observations and "not recorded" not in observations  # real tool output


def test_aggregate_votes():
    recs = [{"instance_id": "a", "useful": True, "resolved": True, "target_files": ["x.py", "y.py"], "context_files": []},
            {"instance_id": "a", "useful": True, "resolved": True, "target_files": ["x.py"], "context_files": ["z.py"]},
            {"instance_id": "a", "useful": False, "resolved": False, "target_files": ["q.py"], "context_files": []}]
    [agg] = aggregate(recs)
    assert agg["n_trajectories"] == 3 and agg["n_useful"] == 2 and agg["target_votes"] == {"x.py": 2, "y.py": 1}
    assert agg["targets_vote"] == ["x.py", "y.py"] and agg["context_votes"] == {"z.py": 1}


def test_mine_profile_is_cached(tmp_path):
    from codegrep.artifacts import Outputs
    from codegrep.config import load_profile

    cfg = load_profile("ci")
    out = Outputs(tmp_path / "a", tmp_path / "f")
    first = mine_profile(cfg, out)
    assert first.stats["parsed"] > 0 and len(first.records) == first.stats["records"]
    for col in ("n_steps", "n_tokens", "steps_to_first_target_view", "n_views", "wasted_read_share", "useful"):
        assert col in first.records.columns
    from codegrep.mining import summary

    fun = dict(zip(*summary.funnel(first.stats).to_dict("list").values()))  # what notebook 01 plots and records
    recs = first.records
    assert fun == {"trajectories": first.stats["read"], "parsed": len(recs),
                   "resolved": int((recs["resolved"] == True).sum()),  # noqa: E712
                   "useful records": int(recs["useful"].sum())}
    assert list(fun.values()) == sorted(fun.values(), reverse=True)  # nested
    stamp = first.records_path.stat().st_mtime_ns
    second = mine_profile(cfg, out)
    assert second.records_path.stat().st_mtime_ns == stamp and second.stats == first.stats


def test_bench_runs_small_on_real_runs_beside_json_load():
    from codegrep.mining.bench import bench_mine, real_runs

    result = bench_mine(n=40, workers=2, baseline_n=20, demonstrations=False)
    assert len(real_runs()) == 400 and result["source"].startswith("400 real")
    assert result["trajectories"] == result["parsed"] == result["records"] == 40 and not result["failed"]
    assert result["json_load_trajectories"] == 20 and result["json_load_trajectories_per_s"] > 0
    assert 100 < result["mean_kb_per_trajectory"] < 1000  # real sizes, not tiny synthetic rows
    assert result["mb_per_s"] > 0 and result["seconds_for_67k"] > 0 and result["peak_memory_mb"] > 0
    assert result["meets_time_target"] == (result["seconds_for_67k"] < 120)


def test_rss_sampler_counts_pages_a_forked_child_shares_once():
    """A child forked from a parent holding 256 MB maps those pages too: summing RSS would read the parent twice
    over, the PSS sum counts the block once. children=False reads the parent alone."""
    import multiprocessing

    import psutil
    import pytest

    from codegrep.mining.bench import RssSampler

    if not hasattr(psutil.Process().memory_full_info(), "pss"):
        pytest.skip("no PSS on this platform (the sampler falls back to RSS)")
    block = bytearray(256 * 2**20)
    block[:: 4096] = b"x" * len(block[:: 4096])  # touch every page
    fork = multiprocessing.get_context("fork")
    ready, done = fork.Event(), fork.Event()
    child = fork.Process(target=_hold_until, args=(ready, done))
    child.start()
    try:
        assert ready.wait(30)
        parent_mb = psutil.Process().memory_info().rss / 2**20
        child_rss_mb = psutil.Process(child.pid).memory_info().rss / 2**20
        both = RssSampler(children=True).sample()
        assert child_rss_mb > 200  # the child does map the parent's block (what an RSS sum would count twice)
        # the block counts once in full (half in each process); the sum stays near the parent's RSS, not twice it
        # (PSS also splits library pages with processes outside this tree, so it may read below the parent's RSS)
        assert 256 * 0.95 < both < parent_mb + 100, (parent_mb, child_rss_mb, both)
        assert abs(RssSampler(children=False).sample() - parent_mb) < 50
    finally:
        done.set()
        child.join(30)
    del block


def _hold_until(ready, done):
    ready.set()
    done.wait(60)


def test_bench_cli_refuses_bad_numbers(capsys):
    assert main(["bench", "mine", "--n", "0"]) == 2
    assert "--n 0" in capsys.readouterr().err


def test_resolved_only_and_workers_give_the_same_records(tmp_path):
    one = mine_files(["embedded"], tmp_path / "a.jsonl", tmp_path / "a.demos.jsonl", MineOptions(), 1, progress=False)
    two = mine_files(["embedded"], tmp_path / "b.jsonl", None, MineOptions(), 2, resolved_only=True, progress=False)
    a = [json.loads(line) for line in open(tmp_path / "a.jsonl")]
    b = [json.loads(line) for line in open(tmp_path / "b.jsonl")]
    assert one["records"] == len(a) == one["parsed"] and two["records"] == len(b) == one["useful"]
    assert b == [r for r in a if r["useful"]]  # same rows, same order, whatever the worker count
    assert two["demonstrations"] == 0 and one["demonstrations"] == one["useful"]


def test_a_kotlin_test_source_sets_data_file_is_a_test_as_the_one_rule_says():
    """docs/mining.md: a file of a Kotlin/Android test source set (``commonTest/``, ``androidTest/``) is *test*;
    mining's folder rule read TEST_DIRS alone, so a fixture there was a target while ``is_test_path`` said test."""
    from codegrep.data.paths import is_test_path
    from codegrep.mining.targets import is_test

    for path in ("app/src/androidTest/assets/fixture.json", "lib/src/commonTest/resources/golden.txt"):
        assert is_test(path) and is_test_path(path), path


def test_a_dotnet_test_project_and_a_swift_test_target_are_test_folders():
    """JamesNK/Newtonsoft.Json keeps its tests in ``Src/Newtonsoft.Json.Tests/`` (the .NET convention, one project per
    ``*.Tests``/``*.UnitTests`` folder) and SwiftPM in ``Tests/<Target>Tests/``: only files named ``*Test(s).cs`` were
    tests, so 574 of its 945 ``.cs`` files (``TestObjects/Person.cs``...) were source to the retrievers, mining and the
    grep view."""
    from codegrep.data.paths import is_test_path
    from codegrep.mining.targets import is_test

    for path in ("Src/Newtonsoft.Json.Tests/TestObjects/Person.cs", "src/Shop.UnitTests/Fakes/Clock.cs",
                 "Tests/ShopTests/Fixtures.swift"):
        assert is_test(path) and is_test_path(path), path
    for path in ("Src/Newtonsoft.Json/JsonConvert.cs", "src/Shop.Testing/Clock.cs", "Sources/Shop/Latest.swift"):
        assert not is_test(path) and not is_test_path(path), path


def test_perl_tests_are_tests_and_rust_benches_are_not():
    """Perl's tests are ``t/*.t`` (``prove``'s layout; ``xt/`` for author tests) with helpers in ``t/lib``: neither
    rule knew them, so a Perl repository's tests were source. Rust's ``tests/`` (integration tests) are tests; its
    ``benches/`` are benchmark code, not tests, and stay source."""
    from codegrep.data.paths import is_test_path
    from codegrep.mining.targets import is_test

    for path in ("t/basic.t", "xt/author/pod.t", "t/lib/Shop/TestHelper.pm", "tests/integration.rs",
                 "crates/core/tests/common/mod.rs"):
        assert is_test(path) and is_test_path(path), path
    for path in ("lib/Shop/Cart.pm", "benches/parse.rs", "src/t.rs", "lib/Shop/Cart.pm.tmpl"):
        assert not is_test_path(path), path

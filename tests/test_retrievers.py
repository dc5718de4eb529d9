"""Retrievers on a hand-made repository, and the harness's metrics against hand-computed cases."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from codegrep.data.tasks import Task
from codegrep.env.tools import ToolCall
from codegrep.lru import LRU
from conftest import commit_all
from codegrep.retrievers.base import Retrieval
from codegrep.retrievers.evaluate import MACRO_KEYS, acc_curve, evaluate, read_rows
from codegrep.retrievers.registry import make_retriever

FILES = {
    "pkg/__init__.py": "from pkg.parser import parse_config_file\n",
    "pkg/parser.py": "import tomllib\n\n\ndef parse_config_file(path):\n    with open(path, 'rb') as fh:\n"
                     "        data = tomllib.load(fh)\n    return data['section']\n",
    "pkg/network.py": "import socket\n\n\nclass HttpClient:\n    def fetch(self, url, retries=3):\n"
                      "        return socket.create_connection((url, 80))\n",
    "pkg/util.py": "def slugify(text):\n    return text.lower().replace(' ', '-')\n\n\ndef read_path(path):\n"
                   "    return open(path).read()\n",
    "docs/usage.md": "# Usage\n\nCall the client to fetch a page.\n",
}
ISSUES = {
    "pkg/parser.py": "parse_config_file raises KeyError on an empty TOML file without a section",
    "pkg/network.py": "HttpClient.fetch ignores the retries argument when the connection is refused",
    "pkg/util.py": "slugify keeps uppercase letters in the generated text",
}


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "cache"


@pytest.fixture()
def tiny_repo(tmp_path) -> tuple[Path, str]:
    """repos/local__tiny: a real git repository with one commit; returns (repos dir, commit)."""
    repo = tmp_path / "repos" / "local__tiny"
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "init", cwd=repo)
    return tmp_path / "repos", git("rev-parse", "HEAD", cwd=repo)


def tiny_tasks(commit: str) -> list[Task]:
    return [Task(f"local__tiny-{i}", "local/tiny", commit, issue, gold_files=[gold])
            for i, (gold, issue) in enumerate(ISSUES.items())]


@pytest.mark.parametrize("name", ["bm25", "grep-heuristic"])
def test_ranks_the_known_file_first(name, cache, tiny_repo):
    repos, commit = tiny_repo
    retriever = make_retriever(name)
    for task in tiny_tasks(commit):
        result = retriever.retrieve(task, repos / "local__tiny")
        assert result.files[0] == task.gold_files[0], (name, task.problem_statement, result.files)
        assert result.reasons[result.files[0]]


@pytest.mark.parametrize("name", ["bm25", "bm25-plain", "grep-heuristic"])
def test_a_repository_without_python_files_is_an_empty_ranking_not_a_crash(name, cache, tmp_path):
    """A Go/Rust/JS repository (or one holding only docs): ``bm25-plain`` indexes ``.py`` files only, and bm25s
    refuses an empty corpus (``max() arg is an empty sequence``)."""
    repo = tmp_path / "poly"
    (repo / "server").mkdir(parents=True)
    (repo / "server" / "token.go").write_text("package auth\n\nfunc ValidateSessionToken(token string) error {\n"
                                              "\treturn nil\n}\n")
    (repo / "README.md").write_text("Session tokens expire.\n")
    task = Task("local__poly-1", "local/poly", "HEAD", "ValidateSessionToken accepts expired session tokens",
                gold_files=["server/token.go"])
    files = make_retriever(name).retrieve(task, repo).files
    assert files == ([] if name == "bm25-plain" else ["server/token.go"]), (name, files)


def test_bm25_plain_indexes_no_symlink_and_names_files_as_the_tools_do(cache, tmp_path):
    """A committed ``.py`` symlink to a file outside the checkout was indexed (its outside content ranked it), a
    dangling or looping one crashed the build, and a non-UTF-8 name came back undecodable instead of escaped."""
    outside = tmp_path / "outside.py"
    outside.write_text("QWERTYLEAK = 1\n")
    repo = tmp_path / "linked"
    repo.mkdir()
    (repo / "leak.py").symlink_to(outside)
    (repo / "dangling.py").symlink_to("nowhere.py")
    (repo / "loop.py").symlink_to("loop.py")
    (repo / "caf\udce9.py").write_text("def zorblax_inside():\n    pass\n")
    commit_all(repo)
    plain = make_retriever("bm25-plain")
    for issue, want in (("QWERTYLEAK is wrong", []), ("zorblax_inside fails", ["caf\\xe9.py"])):
        task = Task("local__linked-1", "local/linked", "HEAD", issue)
        assert plain.retrieve(task, repo).files == want, issue


def test_a_fifo_in_a_live_tree_is_not_indexed(cache, tmp_path):
    """A FIFO named ``pipe.py`` in a user's live tree: bm25 and bm25-plain blocked forever reading it, random drew it."""
    import os

    from codegrep.retrievers.corpus import list_files
    from codegrep.retrievers.plain import python_files

    repo = tmp_path / "live"
    repo.mkdir()
    (repo / "a.py").write_text("def parse_header(x):\n    pass\n")
    os.mkfifo(repo / "pipe.py")
    assert list_files(repo) == ["a.py"] and python_files(repo) == ["a.py"]
    task = Task("local__live-1", "local/live", "", "parse_header fails")
    assert make_retriever("random").retrieve(task, repo).files == ["a.py"]


@pytest.mark.parametrize("defining, calling, name", [
    ("auth/token.go", "api/handlers.go", "ValidateSessionToken"),
    ("web/cart.ts", "web/checkout.ts", "computeCartTotal"),
])
def test_heuristic_puts_a_go_or_ts_definition_before_its_callers(defining, calling, name, cache, tmp_path):
    """The definition bonus knew only Python's def/class: in a Go or TypeScript repository the file that calls a
    name three times outranked the one that defines it."""
    repo = tmp_path / "svc"
    sources = {"auth/token.go": f"package auth\n\nfunc {name}(t string) error {{\n\treturn nil\n}}\n",
               "web/cart.ts": f"export function {name}(items: Item[]): number {{ return 0; }}\n"}
    (repo / defining).parent.mkdir(parents=True, exist_ok=True)
    (repo / defining).write_text(sources[defining])
    (repo / calling).parent.mkdir(parents=True, exist_ok=True)
    (repo / calling).write_text("".join(f"const r{i} = {name}(x{i});\n" for i in range(3)))
    task = Task("local__svc-1", "local/svc", "", f"{name} gives the wrong answer", gold_files=[defining])
    result = make_retriever("grep-heuristic").retrieve(task, repo)
    assert result.files[:2] == [defining, calling], result.reasons
    assert "(def)" in result.reasons[defining]


def test_a_file_named_after_a_grep_term_ranks_ahead_of_one_that_only_uses_it_more(cache, tmp_path):
    """``name_bonus``: the printer named ``latex.py`` ranked below a file that mentions ``latex`` more often (the
    grep heuristic's misses on the real train tasks); the ranked line of the agent's observation reads the same
    score. With ``name_bonus: 1`` the old order comes back."""
    from codegrep.agent.protocol import ranked_files
    from codegrep.env.tools import ToolResult
    from codegrep.retrievers.heuristic import HeuristicConfig, HeuristicRetriever, term_call

    repo = tmp_path / "pkg"
    (repo / "printing").mkdir(parents=True)
    (repo / "printing/latex.py").write_text("class Writer:\n    # writes latex\n    pass\n")
    (repo / "printing/other.py").write_text("".join(f"# see latex output {i}\n" for i in range(4)))
    task = Task("local__pkg-1", "local/pkg", "", "The latex rendering drops the exponent", gold_files=[])
    on = make_retriever("grep-heuristic").retrieve(task, repo)
    assert on.files[0] == "printing/latex.py", on.reasons
    assert "'latex'x1 (named)" in on.reasons["printing/latex.py"] and "(def)" not in on.reasons["printing/latex.py"]
    off = make_retriever("grep-heuristic", name_bonus=1.0).retrieve(task, repo)
    assert off.files[0] == "printing/other.py", off.reasons
    hits = ToolResult("grep", True, "printing/latex.py:2:    # writes latex\n"
                      + "".join(f"printing/other.py:{i + 1}:# see latex output {i}\n" for i in range(4)))
    assert ranked_files([term_call("latex", "word")], [hits], 2) == ["printing/latex.py", "printing/other.py"]
    old, _ = HeuristicRetriever(HeuristicConfig(name_bonus=1.0)).score([("latex", "word")], [hits])
    assert old["printing/other.py"] > old["printing/latex.py"]


def test_heuristic_reads_grep_hits_of_a_file_named_with_colons(cache, tmp_path):
    """``path:line:text`` split at the first ``:<digits>:`` took ``v:12:core.go:3:...`` for a hit in file ``v`` (line
    12): the file that defines the name was dropped (``v`` is no source file) and its caller ranked alone."""
    from codegrep.agent.protocol import shape_result
    from codegrep.env.tools import RepoToolEnvironment
    from codegrep.retrievers.heuristic import parse_hits

    repo = tmp_path / "odd"
    commit_all(repo, {"v:12:core.go": "package v\n\nfunc ValidateSessionToken(t string) error {\n\treturn nil\n}\n",
                      "api/handlers.go": "var r = ValidateSessionToken(x)\n"})
    task = Task("local__odd-1", "local/odd", "", "ValidateSessionToken gives the wrong answer",
                gold_files=["v:12:core.go"])
    result = make_retriever("grep-heuristic").retrieve(task, repo)
    assert result.files[:2] == ["v:12:core.go", "api/handlers.go"], result.reasons
    with RepoToolEnvironment(repo) as env:
        grep = env.call(ToolCall("grep", {"pattern": "ValidateSessionToken"}))
    assert grep.output == "api/handlers.go:1:var r = ValidateSessionToken(x)\n" \
                          "v:12:core.go:3:func ValidateSessionToken(t string) error {"  # what the model sees: as before
    assert parse_hits(grep)[0] == {"api/handlers.go": ["var r = ValidateSessionToken(x)"],
                                   "v:12:core.go": ["func ValidateSessionToken(t string) error {"]}
    assert shape_result(ToolCall("grep", {"pattern": "ValidateSessionToken"}), grep, "files").output == \
        "v:12:core.go (1 hit, def)\napi/handlers.go (1 hit)"


@pytest.mark.parametrize("gold", ["src/components/CartTotal.vue", "lib/cart_total.dart", "src/cart-total.mjs",
                                  "lib/cart/total.ex", "kernels/cart_total.cu"])
@pytest.mark.parametrize("name", ["bm25", "grep-heuristic", "dense"])
def test_source_files_of_other_languages_can_rank(name, gold, cache, tmp_path):
    """A gold file in Vue, Dart, ES modules, Elixir or CUDA was never indexed (not a source suffix), so no
    retriever could return it however plainly the issue named its code."""
    repo = tmp_path / "shop"
    (repo / gold).parent.mkdir(parents=True, exist_ok=True)
    (repo / gold).write_text("cartTotalWithDiscount computes the cart total with the discount applied\n"
                             "def cartTotalWithDiscount(items, discount) { return 0 }\n")
    (repo / "src").mkdir(exist_ok=True)
    (repo / "src" / "app.js").write_text("import { render } from './render';\nrender();\n")
    task = Task("local__shop-1", "local/shop", "", "cartTotalWithDiscount ignores the discount on the cart total",
                gold_files=[gold])
    assert make_retriever(name).retrieve(task, repo).files[:1] == [gold]


def test_an_issue_naming_a_file_of_any_indexed_language_points_at_it():
    """The mention rule listed its own suffixes, a subset of the indexed ones: an issue naming a Vue, Swift or
    shell file did not point at it (BM25's mention boost never applied); it now follows the indexed suffixes."""
    from codegrep.retrievers.query import mentioned_files

    files = ["src/components/CartTotal.vue", "Sources/App/Cart.swift", "scripts/release.sh", "src/app.js"]
    text = "The total in src/components/CartTotal.vue is wrong; Cart.swift too, and release.sh fails."
    assert mentioned_files(text, files) == {"src/components/CartTotal.vue": 1.0, "Sources/App/Cart.swift": 1.0,
                                            "scripts/release.sh": 1.0}


def test_episode_files_of_ids_that_differ_only_in_punctuation_do_not_collide(tmp_path):
    """``a/b-1`` and ``a_b-1`` were both saved as ``a_b-1.json``: the second episode replaced the first."""
    from codegrep.retrievers.agentic import AgentRetriever

    agent = AgentRetriever({"policy": "scripted"}, episodes_dir=tmp_path)
    paths = [agent.episode_path(Task(i, "o/r", "HEAD", "x")) for i in ("a/b-1", "a_b-1", "a b-1", "django__django-11099")]
    assert len(set(paths)) == 4 and all(p.parent == tmp_path for p in paths)
    assert paths[1].name == "a_b-1.json" and paths[3].name == "django__django-11099.json"  # clean ids: as before


def test_random_in_a_repository_without_python_draws_its_source_files(cache, tmp_path):
    """The random floor fell back to every file (README, package.json, docs) where no ``.py`` file exists."""
    repo = tmp_path / "poly"
    for rel in ("server/token.go", "web/cart.ts", "crates/lexer.rs", "docs/auth.md", "package.json", "README.md"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x\n")
    task = Task("local__poly-1", "local/poly", "HEAD", "anything", gold_files=["server/token.go"])
    files = make_retriever("random").retrieve(task, repo).files
    assert sorted(files) == ["crates/lexer.rs", "server/token.go", "web/cart.ts"]


def test_random_matches_suffixes_whatever_their_case(cache, tmp_path):
    """``X.PY`` is a Python file: the case-sensitive match found no ``.py`` and drew README and notes too."""
    repo = tmp_path / "upper"
    for rel in ("pkg/CORE.PY", "pkg/Util.Py", "README.md", "notes.txt"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x\n")
    task = Task("local__upper-1", "local/upper", "HEAD", "anything", gold_files=["pkg/CORE.PY"])
    assert sorted(make_retriever("random").retrieve(task, repo).files) == ["pkg/CORE.PY", "pkg/Util.Py"]


@pytest.mark.parametrize("name", ["bm25", "bm25-plain"])
def test_retrieve_says_when_a_retriever_indexes_no_file_of_the_repository(name, cache, tmp_path, capsys):
    """A Terraform repository (bm25: no source suffix) or a Go one (bm25-plain: no ``.py``) was "no file matched the
    issue text", as if another wording could find something; it names what the retriever indexes instead."""
    from codegrep.cli import main

    repo = tmp_path / "infra"
    commit_all(repo, {"main.tf": 'resource "aws_s3_bucket" "logs" {}\n', "server/bucket.go": "package s\n"}
               if name == "bm25-plain" else {"main.tf": 'resource "aws_s3_bucket" "logs" {}\n'})
    assert main(["retrieve", "--repo", str(repo), "--retriever", name, "aws_s3_bucket logs"]) == 0
    err = capsys.readouterr().err
    assert f"{name} found no file it indexes in {repo}" in err and "matched" not in err, err


def test_retrieve_random_on_a_repository_answers_the_same_twice(cache, tmp_path, capsys):
    """``codegrep retrieve --retriever random`` drew other files on every call: the ad-hoc task id was the time."""
    from codegrep.cli import main

    repo = tmp_path / "many"
    commit_all(repo, {f"pkg/m{i:02d}.py": f"x = {i}\n" for i in range(60)})
    answers = []
    for _ in range(3):
        assert main(["retrieve", "--repo", str(repo), "--retriever", "random", "--k", "5", "parser crash"]) == 0
        answers.append(capsys.readouterr().out)
    assert answers[0] == answers[1] == answers[2] and len(answers[0].split()) == 5
    assert main(["retrieve", "--repo", str(repo), "--commit", "HEAD", "--retriever", "random", "--k", "5",
                 "parser crash"]) == 0
    assert main(["retrieve", "--repo", str(repo), "--commit", "HEAD", "--retriever", "random", "--k", "5",
                 "parser crash"]) == 0
    at_head = capsys.readouterr().out.split()  # the two answers at the commit, one after the other
    assert len(at_head) == 10 and at_head[:5] == at_head[5:]


def test_heuristic_reports_its_tool_use(cache, tiny_repo):
    repos, commit = tiny_repo
    result = make_retriever("grep-heuristic").retrieve(tiny_tasks(commit)[0], repos / "local__tiny")
    assert result.rounds == 2 and result.tool_calls > 2 and result.tokens == 0
    assert "parse_config_file" in result.reasons["pkg/parser.py"]


def test_bm25_index_is_cached_per_commit_and_per_live_listing(cache, tiny_repo):
    repos, commit = tiny_repo
    task = tiny_tasks(commit)[0]
    make_retriever("bm25").retrieve(task, repos / "local__tiny")
    assert len(list((cache / "indexes" / "bm25").iterdir())) == 1
    fresh = make_retriever("bm25")  # a new process would load from disk, not rebuild
    assert fresh.retrieve(task, repos / "local__tiny").files[0] == "pkg/parser.py"
    live = Task("live", "local/tiny", "", task.problem_statement, gold_files=task.gold_files)
    fresh.retrieve(live, repos / "local__tiny")
    (repos / "local__tiny" / "pkg" / "new.py").write_text("parse_config_file = None\n")
    assert "pkg/new.py" in fresh.retrieve(live, repos / "local__tiny").files  # the edit changed the key
    assert len(list((cache / "indexes" / "bm25").iterdir())) == 2  # the older live index was pruned


def test_bm25_index_of_a_branch_name_follows_the_branch(cache, tiny_repo):
    """A task whose base_commit is a branch (or HEAD) keyed the index by that name: after the branch moved, bm25
    served the old commit's index (a file the new commit adds never ranked) while grep-heuristic saw it."""
    repos, commit = tiny_repo
    repo = repos / "local__tiny"
    task = Task("local__tiny-b", "local/tiny", "HEAD", "parse_config_file ignores the section", gold_files=[])
    assert "pkg/toml_section.py" not in make_retriever("bm25").retrieve(task, repo).files
    (repo / "pkg" / "toml_section.py").write_text("def parse_config_file_section(section):\n    return section\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "next", cwd=repo)
    assert "pkg/toml_section.py" in make_retriever("bm25").retrieve(task, repo).files
    keys = sorted(p.name.split("-")[0] for p in (cache / "indexes" / "bm25").iterdir())  # slug@sha-settings
    assert keys == sorted(f"local__tiny@{c}" for c in (commit, git("rev-parse", "HEAD", cwd=repo))), keys


class Fixed:
    """A retriever that returns fixed rankings (for hand-computed harness metrics)."""

    name = "fixed"
    fixed_size = True

    def __init__(self, rankings: dict[str, list[str]]):
        self.rankings, self.calls = rankings, 0

    def retrieve(self, task, checkout):
        self.calls += 1
        assert (Path(checkout) / "pkg" / "parser.py").is_file()  # a real checkout of the commit
        return Retrieval(files=self.rankings[task.instance_id], rounds=1, tool_calls=2, tokens=10)


def test_harness_metrics_match_hand_computed_and_resume(cache, tiny_repo, tmp_path):
    from codegrep.data.repos import RepoResolver

    repos, commit = tiny_repo
    tasks = [Task("t1", "local/tiny", commit, "x", gold_files=["a.py"]),
             Task("t2", "local/tiny", commit, "y", gold_files=["b.py", "c.py"])]
    fixed = Fixed({"t1": ["x.py", "a.py", "y.py"], "t2": ["b.py"]})
    out = tmp_path / "res.jsonl"
    m = evaluate(tasks, RepoResolver(repos_dir=repos, offline=True), fixed, out, k=2, progress=False)
    # t1 at k=2: {x, a} -> P .5 R 1, acc@1 0, mrr .5; t2: {b} -> P 1 R .5, acc@1 1, mrr 1
    assert list(m) == list(MACRO_KEYS)
    assert m["n"] == 2 and m["precision"] == 0.75 and m["recall"] == 0.75 and m["acc@1"] == 0.5
    assert m["mrr"] == 0.75 and m["acc@5"] == 1.0 and m["recall@5"] == 0.75 and m["mean_files"] == 1.5
    assert m["f1"] == pytest.approx((2 / 3 + 2 / 3) / 2) and m["mean_tool_calls"] == 2 and m["mean_tokens"] == 10
    rows = read_rows(out)
    assert rows["t1"]["files"] == ["x.py", "a.py"] and rows["t1"]["ranked"] == ["x.py", "a.py", "y.py"]
    assert acc_curve(rows.values(), 2) == [0.5, 1.0]
    # resume: nothing is rerun; a different k re-scores from the stored ranking
    assert evaluate(tasks, RepoResolver(repos_dir=repos, offline=True), fixed, out, k=2, progress=False) == m
    assert fixed.calls == 2 and len(out.read_text().splitlines()) == 2
    m3 = evaluate(tasks, RepoResolver(repos_dir=repos, offline=True), fixed, out, k=3, progress=False)
    assert fixed.calls == 2 and m3["precision"] == pytest.approx((1 / 3 + 1) / 2)
    first, second = out.read_text().splitlines()
    out.write_text(first + "\n" + second[: len(second) // 2])  # a run killed while writing its last row
    evaluate(tasks, RepoResolver(repos_dir=repos, offline=True), fixed, out, k=2, progress=False)
    assert fixed.calls == 3 and len(read_rows(out)) == 2 and len(out.read_text().splitlines()) == 2


def test_a_top_level_a_directory_is_scored_as_itself(cache, tmp_path):
    """Every path lost a leading ``a/`` (meant for diff headers): in a repository with a top-level ``a/`` folder the
    gold file ``a/x.go`` was scored as ``x.go``, so a retriever that ranked the other file ``x.go`` first got Acc@1 1
    and the oracle returned a file that is not the gold one; an agent's submitted ``a/x.go`` became ``x.go`` too."""
    from codegrep.agent.protocol import AgentConfig, apply_turn
    from codegrep.data.repos import RepoResolver
    from conftest import git_out

    work = tmp_path / "repos" / "local__ab"
    base = commit_all(work, {"a/x.go": "package a\n\nfunc Validate() {}\n", "x.go": "package x\n\nfunc ParseHeader() {}\n"})
    (work / "a/x.go").write_text("package a\n\nfunc Validate() { panic(1) }\n")
    patch = git_out(work, "diff", strip=False)
    task = Task("local__ab-1", "local/ab", base, "ParseHeader is wrong", patch=patch)
    assert task.gold_files == ["a/x.go"]
    resolver = RepoResolver(repos_dir=tmp_path / "repos", offline=True)
    heuristic = evaluate([task], resolver, make_retriever("grep-heuristic"), tmp_path / "h.jsonl", k=1, progress=False)
    assert read_rows(tmp_path / "h.jsonl")["local__ab-1"]["files"] == ["x.go"] and heuristic["acc@1"] == 0.0
    evaluate([task], resolver, make_retriever("oracle"), tmp_path / "o.jsonl", k=1, progress=False)
    assert read_rows(tmp_path / "o.jsonl")["local__ab-1"]["files"] == ["a/x.go"]
    submit = '<tool_call>{"name": "submit", "arguments": {"files": ["a/x.go", "/testbed/b/y.go"]}}</tool_call>'
    assert apply_turn(submit, 1, AgentConfig(max_submit_files=5), lambda calls: []).submit == ["a/x.go", "b/y.go"]


def test_calibration_retrievers(cache, tiny_repo, tmp_path):
    from codegrep.data.repos import RepoResolver

    repos, commit = tiny_repo
    resolver = RepoResolver(repos_dir=repos, offline=True)
    m = evaluate(tiny_tasks(commit), resolver, make_retriever("oracle"), tmp_path / "o.jsonl", progress=False)
    assert m["precision"] == m["recall"] == m["acc@1"] == m["mrr"] == 1.0 and m["mean_files"] == 1.0
    rnd = make_retriever("random", {"retrievers": {"random": {"k": 2}}})
    a = rnd.retrieve(tiny_tasks(commit)[0], repos / "local__tiny").files
    assert a == rnd.retrieve(tiny_tasks(commit)[0], repos / "local__tiny").files and len(a) == 2
    assert all(f.endswith(".py") for f in a)


def test_agent_retriever_runs_the_episode_loop(cache, tiny_repo, tmp_path):
    repos, commit = tiny_repo
    outputs = ['<tool_call>{"name": "grep", "arguments": {"pattern": "def parse_config_file"}}</tool_call>\n'
               '<tool_call>{"name": "glob", "arguments": {"pattern": "**/*.py"}}</tool_call>',
               '<tool_call>{"name": "submit", "arguments": {"files": ["pkg/parser.py", "./pkg/util.py"]}}</tool_call>']
    cfg = {"agent": {"policy": "scripted", "outputs": outputs, "max_turns": 4},
           "retrievers": {"agent": {"episodes_dir": str(tmp_path / "episodes")}}}
    result = make_retriever("agent", cfg).retrieve(tiny_tasks(commit)[0], repos / "local__tiny")
    assert result.files[:2] == ["pkg/parser.py", "pkg/util.py"]
    assert result.rounds == 2 and result.tool_calls == 2 and result.tokens > 0
    saved = json.loads(Path(result.extra["episode_path"]).read_text())
    assert saved["files"] == result.files and saved["instance_id"] == "local__tiny-0"


def test_evaluate_runs_the_agent_in_batches_with_the_rows_of_one_at_a_time(cache, tiny_repo, tmp_path):
    """The harness hands a batched retriever ``batch_size`` tasks at once (one generate per turn for all of them,
    issues of similar length together) and every row lands on its own task: the same rows as one at a time."""
    from codegrep import BatchRetriever
    from codegrep.agent.policies import ScriptedPolicy
    from codegrep.data.repos import RepoResolver
    from codegrep.retrievers.agentic import AgentRetriever

    repos, commit = tiny_repo
    resolver, tasks = RepoResolver(repos_dir=repos, offline=True), tiny_tasks(commit)

    def answer(history):  # grep a word of the issue, then submit the file that holds it: differs per task
        issue = history[1]["content"]
        word = next(w for w in ("parse_config_file", "fetch", "slugify") if w in issue)
        if not any(m["role"] == "assistant" for m in history):
            return '<tool_call>{"name": "grep", "arguments": {"pattern": "def %s"}}</tool_call>' % word
        shown = re.search(r"^([\w/]+\.py):\d+:", history[-1]["content"], re.M).group(1)  # the grep's path:line: hit
        return '<tool_call>{"name": "submit", "arguments": {"files": ["%s"]}}</tool_call>' % shown

    rows, calls = {}, {}
    for size in (1, 2):
        policy, seen = ScriptedPolicy(answer), []
        generate = policy.generate
        policy.generate = lambda batch, generate=generate, seen=seen: (seen.append(len(batch)), generate(batch))[1]
        agent = AgentRetriever({"policy": "scripted", "batch_size": size, "max_turns": 3, "grep_view": "lines"}, {},
                               tmp_path / f"episodes{size}", policy=policy)
        assert isinstance(agent, BatchRetriever) and agent.batch_size == size
        metrics = evaluate(tasks, resolver, agent, tmp_path / f"agent{size}.jsonl", progress=False)
        rows[size], calls[size] = read_rows(tmp_path / f"agent{size}.jsonl"), seen
        assert metrics["acc@1"] == 1.0 and sorted(p.name for p in (tmp_path / f"episodes{size}").iterdir()) == \
            [f"local__tiny-{i}.json" for i in range(3)]
    assert calls[1] == [1] * 6 and calls[2] == [2, 2, 1, 1]  # 3 tasks, 2 turns: 2+1 per turn in batches of 2
    for iid, row in rows[1].items():
        assert row["files"] == rows[2][iid]["files"] == row["gold"], iid
        assert row["rounds"] == rows[2][iid]["rounds"] == 2 and row["extra"]["submitted"]
        assert row["fingerprint"] != rows[2][iid]["fingerprint"]  # batch_size is a setting: a hf batch pads histories


@pytest.mark.slow  # importing sentence-transformers alone takes 10-70 s on 2 busy cores
def test_dense_ranks_by_best_chunk(cache, tiny_repo):
    repos, commit = tiny_repo
    retriever = make_retriever("dense", {"retrievers": {"dense": {"max_seq_length": 64}}})
    result = retriever.retrieve(tiny_tasks(commit)[1], repos / "local__tiny")
    assert result.files[0] == "pkg/network.py", result.files
    source = sorted(f for f in FILES if f.endswith(".py"))  # the file policy: source files only (docs/ left out)
    assert sorted(result.files) == source and result.extra["n_chunks"] == len(source)
    assert list((cache / "indexes" / "dense").rglob("chunks.npz"))


def test_unknown_settings_are_named():
    from codegrep.config import ConfigError

    with pytest.raises(ConfigError, match=r"retrievers.bm25: unknown key 'kk'"):
        make_retriever("bm25", {"retrievers": {"bm25": {"kk": 1}}})


def test_fit_from_counts_equals_bm25s_index_on_token_lists():
    import bm25s
    import numpy as np
    from collections import Counter

    from codegrep.retrievers.lexical import fit_counts

    docs = [["parse", "config", "parse", "toml"], ["http", "fetch"], ["config", "config", "slug", "text", "x"], ["y"]]
    reference = bm25s.BM25(k1=1.2, b=0.75)
    reference.index(docs, show_progress=False)
    ours = bm25s.BM25(k1=1.2, b=0.75)
    fit_counts(ours, [dict(Counter(d)) for d in docs])
    for query in (["parse"], ["config", "fetch"], ["toml", "slug", "http"]):
        np.testing.assert_allclose(ours.get_scores(query), reference.get_scores(query), rtol=1e-6)


def test_bm25_index_with_content_cache_equals_a_cold_build(tmp_path, monkeypatch):
    """Per-file analyses are shared across snapshots by content: a second snapshot that shares files with the
    first must index exactly as a cold build of it would (files, weights, definitions, scores)."""
    import numpy as np

    from codegrep.retrievers import lexical

    first, second = tmp_path / "a", tmp_path / "b"
    for root, files in ((first, FILES), (second, {**FILES, "pkg/util.py": "def slugify(t):\n    return t\n",
                                                  "pkg/extra.py": "class Extra:\n    pass\n"})):
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    config = lexical.BM25Config()
    monkeypatch.setattr(lexical, "_CONTENT", LRU(lexical.CONTENT_CACHE_FILES))
    lexical.build_index(first, config)
    warm = lexical.build_index(second, config)
    assert len(lexical._CONTENT) == len([f for f in FILES if f.endswith(".py")]) + 2
    monkeypatch.setattr(lexical, "_CONTENT", LRU(lexical.CONTENT_CACHE_FILES))
    cold = lexical.build_index(second, config)
    assert warm.files == cold.files and warm.weights == cold.weights and warm.defs == cold.defs
    for key in ("data", "indices", "indptr"):
        assert np.array_equal(warm.model.scores[key], cold.model.scores[key])
    assert warm.vocab == cold.vocab


def test_issue_path_patterns_find_what_the_quadratic_patterns_found():
    """The path patterns that read an issue (``query._PATH``: bm25's mention boost; ``heuristic._PATH``: the grep
    heuristic's and the agent's terms) were quadratic in the length of a run of path characters (a 20,000-character
    hex dump took 5 s per retrieval; the timing is ``codegrep retrieve`` in the commit, not a test); anchored at
    the start of a run they must return exactly what the old patterns returned: on the shipped real issues and on
    random texts made of path pieces."""
    import gzip
    import random

    from codegrep.config import project_root
    from codegrep.retrievers import heuristic, query

    lookbehind = r"(?<![\w./\\-])"
    assert query._PATH.pattern.startswith(lookbehind)
    old_query = re.compile(query._PATH.pattern[len(lookbehind):])  # the same suffixes, unanchored
    old_heuristic = re.compile(r"\b[\w./-]+\.(?:" + "|".join(sorted((s[1:] for s in heuristic.ISSUE_PATH_SUFFIXES), key=len, reverse=True))
                               + r")\b")  # the same suffixes, unanchored
    texts = []
    for name in ("swebench_verified.jsonl.gz", "swebench_lite.jsonl.gz"):
        with gzip.open(project_root() / "data" / "swebench" / name, "rt") as fh:
            texts += [json.loads(line)["problem_statement"] for line in fh]
    rng = random.Random(0)
    pieces = ["a", "Z", "_", "9", "é", ".", "/", "-", "\\", " ", "\n", ":", "(", '"', ".py", ".pyx", ".c", ".json", "py",
              "x.py", "./", "../", "-.", "pkg/mod.py", "C:\\x\\y.py", ".h5", ".pyc", "s.rst"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 60))) for _ in range(20_000)]
    for text in texts:
        assert query._PATH.findall(text) == old_query.findall(text), text
        assert heuristic._PATH.findall(text) == old_heuristic.findall(text), text


@pytest.mark.parametrize("sub", ["", "web"])
@pytest.mark.parametrize("name", ["bm25", "random"])
def test_a_live_tree_build_output_the_ignore_files_hide_is_not_ranked(name, sub, cache, tmp_path):
    """A live TypeScript checkout after ``npm run build``: the git-ignored ``distribution/`` copies of every source
    file (``.js``, ``.d.ts``) and a ``coverage/`` report were indexed, so bm25 (and dense, random) ranked compiled
    copies beside or above the source, while grep-heuristic's tools (ripgrep) hid them. A tracked file the ignore
    files match stays; so does a run from a subfolder (``--repo web``)."""
    repo = tmp_path / "shop"
    root = f"{sub}/" if sub else ""
    commit_all(repo, {f"{root}.gitignore": "distribution/\ncoverage\n",
                      f"{root}source/merge.ts": "export const mergeHeaders = (a, b) => a;\n",
                      f"{root}coverage/keep.ts": "export const mergeHeadersKept = 1;\n"}, force=True)
    for rel in ("distribution/source/merge.js", "distribution/source/merge.d.ts", "coverage/lcov/merge.ts"):
        (repo / root / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / root / rel).write_text("export const mergeHeaders = (a, b) => a; // mergeHeaders mergeHeaders\n")
    task = Task("local__shop-1", "local/shop", "", "mergeHeaders drops the second headers")
    files = make_retriever(name).retrieve(task, repo / sub).files
    assert sorted(files) == ["coverage/keep.ts", "source/merge.ts"], files


@pytest.mark.parametrize("name", ["bm25", "grep-heuristic"])
def test_a_go_package_named_doc_is_source_not_documentation(name, cache, tmp_path):
    """spf13/cobra's man-page generator lives in the Go package ``doc/`` (``doc/man_docs.go``): the default
    ``exclude_dirs: [doc, docs]`` left every file of it out, so no retriever could return it however plainly the
    issue named ``GenManTree``. A documentation tree's own files (``docs/conf.py``) stay out."""
    repo = tmp_path / "cobra"
    commit_all(repo, {"command.go": "package cobra\n\nfunc (c *Command) Execute() error { return nil }\n",
                      "doc/man_docs.go": "package doc\n\n// GenManTree writes a man page for each command.\n"
                                         "func GenManTree(cmd *cobra.Command, header *GenManHeader) error {\n"
                                         "\treturn nil\n}\n",
                      "docs/conf.py": "def GenManTree():\n    pass\n"})
    task = Task("local__cobra-1", "local/cobra", "", "GenManTree ignores header.Section when the title is empty",
                gold_files=["doc/man_docs.go"])
    files = make_retriever(name).retrieve(task, repo).files
    assert files[0] == "doc/man_docs.go" and "docs/conf.py" not in files, files


@pytest.mark.parametrize("defining, text", [
    ("cmd/command.go", "package cmd\n\nfunc (c *Command) MarkFlagsExclusive(names ...string) {\n}\n"),
    ("cmd/types.go", "package cmd\n\ntype MarkFlagsExclusive struct {\n\tnames []string\n}\n"),
    ("web/flags.ts", "export const MarkFlagsExclusive = (names: string[]) => names;\n"),
    ("app/Flags.kt", "fun MarkFlagsExclusive(names: List<String>) = names\n"),
    ("src/Flags.java", "public final class Flags {\n    public static void MarkFlagsExclusive(String n) {}\n}\n"),
    ("src/Group.java", "class Group {\n    void MarkFlagsExclusive(String n) {\n    }\n}\n"),  # package-private
    ("lib/flags.c", "static int\nMarkFlagsExclusive (char **names)\n{\n  return 0;\n}\n"),  # GNU style
    ("app/Group.kt", "fun <T> MarkFlagsExclusive(names: List<T>) = names\n"),
    ("src/flags.cpp", "template <typename T> T Flags<T>::MarkFlagsExclusive(T names) {\n  return names;\n}\n"),
])
def test_bm25_definition_boost_knows_go_methods_and_types_and_arrow_functions(defining, text, cache, tmp_path):
    """bm25's definition boost read only ``def``/``class``/``func NAME``: a Go method (``func (c *Command) Name``), a
    Go ``type Name struct``, a TS arrow function, a Kotlin ``fun``, a Java method defined nothing, so a file that
    only called the name outranked the one defining it (spf13/cobra: 151 method and type names asked as
    "`Name` returns the wrong result", Acc@1 0.795 -> 0.967). Then a package-private Java method, a GNU-style C
    function, a Kotlin ``fun <T>`` and a C++ template member defined nothing either."""
    repo = tmp_path / "svc"
    caller = "cmd/caller" + defining[defining.rindex("."):]
    commit_all(repo, {defining: text, caller: "".join(f"x{i} := MarkFlagsExclusive(names{i}) // exclusive flags\n"
                                                      for i in range(4))})
    task = Task("local__svc-1", "local/svc", "", "`MarkFlagsExclusive` marks flags exclusive in the wrong group")
    assert make_retriever("bm25").retrieve(task, repo).files[:1] == [defining]


def test_a_class_name_opening_with_an_acronym_is_an_identifier(cache, tmp_path):
    """sindresorhus/ky, "HTTPError message is missing the status text": ``HTTPError`` (like ``IOException``,
    ``URLSearchParams``, astropy's ``HDUList``) was read as the plain word ``httperror``, so neither the heuristic's
    definition bonus nor bm25's definition boost applied, and test files that use the name (and read ``message``,
    ``status``) outranked the file defining the class."""
    from codegrep.retrievers.query import code_identifiers

    files = {"source/errors/HTTPError.ts": "export class HTTPError extends KyError {\n\tstatus: number;\n}\n",
             "source/core/Ky.ts": "import {HTTPError} from '../errors/HTTPError';\nthrow new HTTPError(text);\n"}
    for t in ("hooks", "retry", "main"):
        files[f"test/{t}.ts"] = "".join(f"t.is(error.message, 'x{i}');\nt.is(error.status, {i});\n"
                                        f"t.true(error instanceof HTTPError);\n" for i in range(6))
    repo = tmp_path / "ky"
    commit_all(repo, files)
    task = Task("local__ky-1", "local/ky", "", "HTTPError message is missing the status text")
    retriever = make_retriever("grep-heuristic", read_top=0)  # the profiles' setting
    assert retriever.retrieve(task, repo).files[:1] == ["source/errors/HTTPError.ts"]
    assert "HTTPError" in code_identifiers(task.problem_statement)  # bm25's definition boost reads the same name


@pytest.mark.parametrize("named", ["src/utils/format-date.tsx", "app/src/main/kotlin/shop/cart-format.kt",
                                   "Sources/Shop/format-date.swift"])
def test_heuristic_globs_a_file_the_issue_names_in_any_indexed_language(named, cache, tmp_path):
    """The heuristic's path rule listed .py/.js/.ts/.go/... but not .tsx, .kt or .swift: "Crash in
    src/utils/format-date.tsx" was grepped as the identifier ``date.tsx`` (no file writes it), never globbed, so the
    file the issue names was not in the ranking at all; the files mentioning dates were."""
    suffix = named[named.rindex("."):]
    files = {named: "export default (v: string) => v.split('-').reverse().join('/');\n"}
    for page in ("Home", "Settings", "Booking"):
        files[f"src/pages/{page}{suffix}"] = "// when the value is empty the date crashes\nconst date = value;\n"
    repo = tmp_path / "app"
    commit_all(repo, files)
    task = Task("local__app-1", "local/app", "", f"Crash in {named} when the value is empty")
    assert make_retriever("grep-heuristic", read_top=0).retrieve(task, repo).files[:1] == [named]


def test_random_in_a_go_repository_with_one_python_script_draws_its_go_files(cache, tmp_path):
    """spf13/cobra plus one ``hack/gen_changelog.py``: the random floor drew among ``.py`` files only, so it answered
    that one script (one file where k = 20 were asked) and could never draw the repository's code."""
    repo = tmp_path / "cobra"
    gos = [f"cmd_{i}.go" for i in range(6)]
    for rel in (*gos, "hack/gen_changelog.py", "README.md"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x\n")
    task = Task("local__cobra-1", "local/cobra", "HEAD", "anything", gold_files=["cmd_0.go"])
    assert sorted(make_retriever("random").retrieve(task, repo).files) == sorted([*gos, "hack/gen_changelog.py"])


@pytest.mark.parametrize("line", ["public" + " " * 1500 + "x", "  static final" + " " * 1500 + "int x = 1;"])
def test_the_definition_rule_is_linear_in_a_run_of_spaces_after_a_modifier(line):
    """``query._OTHER_DEFINITION``'s Java/C# alternative let the modifier's ``[ \\t]+``, the return type's
    ``[\\w<>\\[\\],.? ]+?`` (spaces included) and the ``[ \\t]+`` before the name share one run of spaces (and a
    modifier be read by the prefix or by the alternative): cubic backtracking. A 1,500-space line took seconds,
    4,000 spaces two minutes, 20,000 hours, in bm25's index build (every line of a file) and the grep view."""
    import time

    from codegrep.retrievers.query import definitions, line_definitions

    start = time.perf_counter()
    assert line_definitions(line, "A.java") == [] and definitions(line.encode(), "A.java") == []
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("path, line, names", [
    ("lib/rack/utils.rb", "  def self.parse_query(qs, sep)", ["parse_query"]),  # not `self`
    ("lib/rack/lint.rb", "class Rack::Lint < Base", ["Lint"]),  # not `Rack`
    ("src/read.rs", "let n = ((n1 - 0xD800) as u32) << 10;", []),  # a local, not a function bound to `n`
    ("src/cart.ts", "const total = (a + b) * 2;", []),
    ("src/cart.ts", "export const total = (a: number, b = f()) => a + b;", ["total"]),
    ("src/macros.rs", "macro_rules! json {", ["json"]),
    ("net.c", "struct timeval tv;", []), ("net.c", "    const struct timeval *timeout,", []),  # uses of a type
    ("sds.h", "struct sdshdr8 {", ["sdshdr8"]), ("Policy.java", "public enum Policy implements Strategy {", ["Policy"]),
    ("cJSON.c", "CJSON_PUBLIC(cJSON *) cJSON_Parse(const char *value)", ["cJSON_Parse"]),
    ("hiredis.c", "static void *__redisBlockForReply(redisContext *c) {", ["__redisBlockForReply"]),
    ("hiredis.c", "redisContext *redisConnect(const char *ip, int port) {", ["redisConnect"]),
    ("cJSON.h", "CJSON_PUBLIC(cJSON *) cJSON_Parse(const char *value);", []),  # a prototype: the .c defines it
    ("w.cpp", "void Widget::resize(int w) {", ["resize"]), ("w.c", "    return parse_value(item, buf);", []),
    ("read.h", "#define REDIS_REPLY_NIL 4", ["REDIS_REPLY_NIL"]), ("cJSON.c", "} printbuffer;", ["printbuffer"]),
    ("cJSON.h", "typedef int cJSON_bool;", ["cJSON_bool"]),
    ("hiredis.h", "typedef struct redisReply {", ["redisReply"]),
    ("JsonConvert.cs", "    public static T? DeserializeObject<T>(string value)", ["DeserializeObject"]),
    ("Adapter.java", "  @Override public void write(JsonWriter out, Object value) {", ["write"]),
    ("LogRecord.php", "    public function &offsetGet(mixed $offset): mixed", ["offsetGet"]),
])
def test_the_definition_rule_reads_each_languages_definition_lines(path, line, names):
    """Probed on serde-rs/json, rack/rack, google/gson, Seldaek/monolog, DaveGamble/cJSON, redis/hiredis and
    JamesNK/Newtonsoft.Json against ctags: Ruby's ``def self.x`` defined ``self`` (Python's rule read every file), a
    Rust or C# local bound to a parenthesised expression was a "function", C's ``struct timeval tv;`` defined
    ``timeval``, and C functions without a modifier, ``#define`` and ``typedef`` names, C# generic methods, annotated
    Java methods and Rust macros defined nothing, so bm25's boost and the heuristic's bonus missed the defining file
    (cJSON: 895 of 1,178 functions missed; symbol-named queries' Acc@1 0.583 -> 0.967 for bm25)."""
    from codegrep.retrievers.query import line_definitions

    assert line_definitions(line, path) == names


@pytest.mark.parametrize("path, line, names", [
    ("Worker.java", "    void run() {", ["run"]),  # package-private: no modifier
    ("Worker.java", "    <T> T pick(List<T> xs) {", ["pick"]),
    ("Index.java", "    Map<String, List<Integer>> index(String s) throws IOException {", ["index"]),
    ("Index.java", "    @Override String describe() {", ["describe"]),
    ("Shape.cs", "    int Size() => count;", ["Size"]), ("Worker.java", "    static int size(List<T> xs) {", ["size"]),
    ("Worker.java", "    void run();", []), ("Worker.java", "        return helper(x);", []),  # a declaration, a call
    ("Worker.java", "        else if (ready) {", []), ("Worker.java", "    public Worker(int size) {", []),
    ("Query.cs", "        select new Order(id,", []), ("Proxy.cs", "            ? CallMethod(binder, NoArgs)", []),
    ("Currency.cs", "    [CompilerGenerated, DebuggerBrowsable(DebuggerBrowsableState.Never)]", []),
])
def test_the_definition_rule_reads_java_and_csharp_methods_without_a_modifier(path, line, names):
    """A Java method without an access modifier (package-private ``void run() {``, ``<T> T pick(``) or a C# one
    (private by default) defined nothing: the Java/C# branch of ``_OTHER_DEFINITION`` needs a modifier first (google/
    gson's ``JavaTimeTypeAdapters.create``, ``LinkedTreeMap.find``, its JUnit 5 test methods). Statements, abstract
    declarations, constructors, ternary continuations and C# attributes still define nothing."""
    from codegrep.retrievers.query import line_definitions

    assert line_definitions(line, path) == names


@pytest.mark.parametrize("path, text, names", [
    ("eval.c", "static int\nfoo (int x)\n{\n  return x;\n}\n", ["foo"]),  # GNU: the type on its own line
    ("eval.c", "static void\nff_stack_print (ff_state_t *bottom,\n                ff_state_t *top)\n{\n}\n",
     ["ff_stack_print"]),
    ("tree.cc", "bool\ncgraph_node::remove (void)\n{\n}\n", ["remove"]),
    ("eval.c", "extern int\nfoo (int x);\n", []),  # a prototype
    ("fitsio.h", "/*\nCopyright (Unpublished--all rights reserved)\n*/\n", []),  # a comment's words
    ("gtkbutton.c", "G_DEFINE_TYPE (GtkButton, gtk_button, GTK_TYPE_WIDGET)\n", []),  # a macro's call
    ("zuncompress.c", "int (*work) OF((FILE *in, FILE *out)) = unlzw;\n", []),
])
def test_the_c_rule_reads_gnu_style_definitions(path, text, names):
    """GNU style (gcc, glib, bison's parsers, cfitsio's ``iraffits.c``) puts the return type on its own line and the
    name at column 0 before a space: ``foo (int x)`` had no type before the name on its line, so it defined nothing
    and bm25's boost missed the defining file."""
    from codegrep.retrievers.query import definitions

    assert definitions(text.encode(), path) == names


@pytest.mark.parametrize("path, line, names", [
    ("Pick.kt", "fun <T> pick(xs: List<T>): T = xs.first()", ["pick"]),
    ("Lists.kt", "private fun <T : Comparable<T>> List<T>.second(): T {", ["second"]),
    ("Color.kt", "enum class Color(val rgb: Int) {", ["Color"]),  # not `class`
    ("color.hpp", "enum class Color : int {", ["Color"]),
    ("vec.cpp", "std::vector<int> Foo::bar(int x) {", ["bar"]),
    ("box.hpp", "template <typename T> T Box<T>::get(int i) {", ["get"]),
    ("box.hpp", "T Box<T>::get(int i) const {", ["get"]),  # under its `template <typename T>` line
    ("index.cpp", "const std::map<std::string, std::vector<int>>& Index::lookup() const {", ["lookup"]),
    ("vec.cpp", "std::vector<int> Foo::bar(int x);", []),  # a declaration
])
def test_the_definition_rule_reads_kotlin_generics_and_cpp_templates(path, line, names):
    """Kotlin's ``fun <T> name(`` defined nothing (a type parameter before the name) and ``enum class Color`` defined
    ``class``; C++'s member definitions with a template return type or class (``std::vector<int> Foo::bar(``,
    ``T Foo<T>::get(``) defined nothing."""
    from codegrep.retrievers.query import line_definitions

    assert line_definitions(line, path) == names


@pytest.mark.parametrize("path, line", [
    ("A.java", "    " + "public " * 3000 + "x"), ("a.kt", "fun " + "<" * 20000),
    ("a.kt", "fun " + "a<b>." * 4000 + "x"),
    ("A.java", "    " + "<a " * 6000 + "("), ("A.cs", "    int" + "[]" * 10000 + " x"),
    ("a.cpp", "template " + "<" * 20000), ("a.cpp", "a::" * 6000 + "("), ("a.cpp", "std::vector<" * 1500 + " f("),
    ("a.c", "foo" + " " * 20000 + "("), ("a.c", "foo (" + "a *" * 6000), ("a.c", "foo (a) " + "/" * 20000),
    ("a.c", "A" + "a" * 20000 + " ("), ("a.c", "Aa_" * 6000 + " ("),
])
def test_the_definition_rules_are_linear_in_a_long_line_of_modifiers_brackets_or_qualifiers(path, line):
    """Each rule reads every line of every file of its languages (bm25's index build). A line of 3,000 modifiers
    took 2 s in ``_OTHER_DEFINITION`` (each shorter run of them was tried again: quadratic); 20,000-character lines
    of ``<``, ``::``, ``[]`` or spaces must stay in milliseconds."""
    import time

    from codegrep.retrievers.query import definitions

    start = time.perf_counter()
    definitions(line.encode(), path)
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("line", ["a " * 5000 + "(", "a *" * 3000 + ";", "typedef " + "a (" * 3000,
                                  "A(b) " * 2000, "struct " + "a " * 5000, "def " + "a." * 5000])
def test_the_c_rule_is_linear_in_a_long_line(line):
    """:data:`codegrep.retrievers.query._C_DEFINITION` reads every line of every C file (bm25's index build): a
    10,000-character line of words, stars or macro calls must not backtrack."""
    import time

    from codegrep.retrievers.query import definitions

    start = time.perf_counter()
    definitions(line.encode(), "a.c")
    assert time.perf_counter() - start < 0.5


def test_bm25_definition_boost_finds_the_c_file_defining_a_function_its_header_declares(cache, tmp_path):
    """DaveGamble/cJSON: ``CJSON_PUBLIC(cJSON *) cJSON_Parse(const char *value)`` (no ``static``: C's rule did not
    exist) defined nothing, so the header's prototype and a fuzzer calling the function outranked ``cJSON.c``."""
    repo = tmp_path / "cjson"
    define = "CJSON_PUBLIC(cJSON *) cJSON_Parse(const char *value)"
    commit_all(repo, {"cJSON.c": define + "\n{\n    return parse(value);\n}\n",
                      "cJSON.h": "/* cJSON_Parse: parse a string */\n" + define + ";\n",
                      "fuzz/read.c": "".join(f"    item = cJSON_Parse(buffer_{i});\n" for i in range(4))})
    task = Task("local__cjson-1", "local/cjson", "", "cJSON_Parse crashes on empty input")
    assert make_retriever("bm25").retrieve(task, repo).files[:1] == ["cJSON.c"]


@pytest.mark.parametrize("defining, text", [
    ("lib/Shop/Cart.pm", "package Shop::Cart;\nsub apply_discount {\n    my ($self, $rate) = @_;\n}\n1;\n"),
    ("lib/tasks/cart.rake", "namespace :cart do\n  def apply_discount(rate)\n    rate\n  end\nend\n"),
    ("include/shop/cart.inl", "inline double apply_discount(double rate) {\n    return rate;\n}\n"),
])
def test_bm25_indexes_perl_modules_rake_tasks_and_cpp_inline_bodies(defining, text, cache, tmp_path):
    """``SOURCE_SUFFIXES`` had ``.pl`` but not ``.pm`` (a Perl library is all ``.pm``), no ``.rake`` and no C++
    ``.inl``/``.ipp``/``.tpp``: the file defining the name was never indexed, so bm25 answered the scripts calling
    it."""
    repo = tmp_path / "shop"
    commit_all(repo, {defining: text, "bin/checkout.pl": "".join(f"apply_discount($rate{i});\n" for i in range(4))})
    task = Task("local__shop-1", "local/shop", "", "apply_discount rounds the rate the wrong way")
    assert make_retriever("bm25").retrieve(task, repo).files[:1] == [defining]


def test_definitions_of_a_file_with_thousands_of_ruby_defs_is_not_quadratic():
    """A Ruby/Scala ``def`` line matches Python's rule and the other languages' one: the second's names were
    checked against a list of the first's, quadratic in the file's definitions (16,000: over a second)."""
    import time

    from codegrep.retrievers.query import definitions

    data = "".join(f"  def method_{i}(x)\n    {i}\n  end\n" for i in range(16000)).encode()
    start = time.perf_counter()
    assert len(definitions(data, "a.rb")) == 16000
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("path, line, names", [
    ("IMailer.cs", "    Task SendAsync(Message m, CancellationToken ct = default);", []),  # an interface method
    ("Options.cs", "    void Configure(int retries = 3) => Apply(retries);", ["Configure"]),
    ("Options.cs", "    void Configure(int retries = 3) {", ["Configure"]),
    ("Query.cs", "            where IsValid(order)", []), ("Query.cs", "            select ToDto(order)", []),
    ("Query.cs", "            orderby SortKey(order)", []), ("Query.cs", "            group Key(o) by o.Region", []),
])
def test_the_typed_method_rule_skips_interface_methods_with_defaults_and_linq_clauses(path, line, names):
    """``_TYPED_METHOD``'s "ends with ``;`` before any body" check stopped at the first ``=`` (meant for C#'s ``=>``),
    so an interface method with a default argument (``ct = default);``, common in async C# APIs) defined its name;
    and a LINQ query's continuation line (``where IsValid(x)``, ``select ToDto(x)``) read as a method declared by
    its type (``where``) and defined the method it calls."""
    from codegrep.retrievers.query import line_definitions

    assert line_definitions(line, path) == names

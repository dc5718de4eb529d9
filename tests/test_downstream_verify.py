"""``codegrep verify``: Docker-free verdicts on real sympy snapshots with the harness's own parser and grading.

The slow test runs the real tests of 3 shipped sympy instances (gold resolves, the bare base does not, an agent
patch that does not apply fails); the fast ones check the reasons given where no local verdict is possible."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from codegrep.data.tasks import Task
from codegrep.downstream.verify import RECIPES, Verifier, VerifyConfig, grade, harness_test_paths, parse_log
from conftest import git_out

FAST = ["sympy__sympy-11618", "sympy__sympy-12481", "sympy__sympy-12489"]  # test files of ~15 s each


def _rows(ids: list[str] | None = None, repo: str | None = None) -> list[dict]:
    from codegrep.data.shipped import verified_rows_path

    src = verified_rows_path()
    if not src.is_file():
        pytest.skip(f"shipped SWE-bench rows absent: {src}")
    with gzip.open(src, "rt") as fh:
        rows = [json.loads(x) for x in fh]
    return [r for r in rows if (ids is None or r["instance_id"] in ids) and (repo is None or r["repo"] == repo)]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codegrep", "verify", *args], capture_output=True, text=True,
                          timeout=1200)


def test_sympy_log_is_read_by_the_harness_parser_and_graded_by_its_rules():
    log = "test_a ok\ntest_b F\ntest_c E\n"
    status = parse_log(RECIPES["sympy/sympy"], log)
    assert status == {"test_a": "PASSED", "test_b": "FAILED", "test_c": "ERROR"}
    assert grade(status, ["test_a"], []) == (True, [], [])
    assert grade(status, ["test_a"], ["test_b", "test_missing"]) == (False, [], ["test_b", "test_missing"])
    diff = "diff --git a/x/tests/test_a.py b/x/tests/test_a.py\n--- a\n+++ b\ndiff --git a/y.py b/y.py\n"
    assert harness_test_paths(diff) == ["x/tests/test_a.py", "y.py"]


def test_unverifiable_instances_say_why_without_running_anything(tmp_path):
    v = Verifier(VerifyConfig(cache_dir=str(tmp_path)))
    astropy = Task.from_dict(_rows(repo="astropy/astropy")[0])
    assert v.verdict(astropy, astropy.patch, "gold").reason.startswith("unverifiable here: no local recipe")
    no_test_patch = [r for r in _rows(repo="sympy/sympy") if not r.get("test_patch")]
    assert no_test_patch, "the shipped rows have sympy instances without test_patch"
    bare = Task.from_dict(no_test_patch[0])
    verdict = v.verdict(bare, bare.patch, "gold")
    assert verdict.resolved is None and verdict.reason == "unverifiable here: the task row has no test_patch"
    assert not list(tmp_path.iterdir())  # nothing ran, nothing cached


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    rows = tmp_path / "t.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in _rows(FAST[:1])))
    for args, needle in ((["--patch", str(tmp_path / "missing.diff")], "--patch"),
                         (["--instance", "nope__nope-1"], "nope__nope-1"),
                         (["--repos", str(tmp_path / "nothing")], "--repos")):
        out = _cli("--tasks", str(rows), "--profile", "ci", *args)
        assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_gold_resolves_and_the_bare_base_does_not_on_three_sympy_instances(tmp_path):
    from codegrep.data.shipped import snapshot_repos_dir

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in _rows(FAST)))
    common = ["--tasks", str(tasks), "--repos", str(snapshot_repos_dir()), "--profile", "ci",
              "--set", f"downstream.verify.cache_dir={tmp_path / 'cache'}", "--jobs", "1"]
    ids = [a for i in FAST for a in ("--instance", i)]
    out = _cli(*common, *ids, "--out", str(tmp_path / "trust.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    table = json.loads((tmp_path / "trust.json").read_text())
    assert table["complete"] and table["summary"]["trusted"] == 3, table["summary"]
    for row in table["rows"]:
        assert row["gold"]["resolved"] is True and row["none"]["resolved"] is False
        assert row["none"]["f2p_failed"] and not row["gold"]["f2p_failed"] and row["gold"]["n_tests"] > 0
    gold = _cli(*common, *ids, "--patch", "gold")
    none = _cli(*common, *ids, "--patch", "none")
    assert json.loads(gold.stdout.splitlines()[-1])["resolved"] == 3
    assert json.loads(none.stdout.splitlines()[-1])["not_resolved"] == 3
    # an agent patch: the gold fix as a file resolves; a patch that does not apply is a failed fix
    row = _rows(FAST[:1])[0]
    (tmp_path / "fix.diff").write_text(row["patch"])
    (tmp_path / "bad.diff").write_text("diff --git a/no_such.py b/no_such.py\n--- a/no_such.py\n+++ b/no_such.py\n"
                                       "@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    fix = _cli(*common, "--instance", FAST[0], "--patch", str(tmp_path / "fix.diff"), "--out", str(tmp_path / "v.json"))
    assert json.loads(fix.stdout.splitlines()[-1])["resolved"] == 1
    bad = _cli(*common, "--instance", FAST[0], "--patch", str(tmp_path / "bad.diff"), "--out", str(tmp_path / "b.json"))
    assert bad.returncode == 0, bad.stderr[-2000:]
    verdict = json.loads((tmp_path / "b.json").read_text())["rows"][0]
    assert verdict["resolved"] is False and "does not apply" in verdict["reason"], verdict


def _git(repo, *args):
    return git_out(repo, *args, strip=False)


def _diff(repo, edits: dict[str, str]) -> str:
    """The diff that turns the committed files into ``edits`` (the tree is restored afterwards)."""
    for path, text in edits.items():
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    out = _git(repo, "diff", "--cached")
    _git(repo, "reset", "-q", "--hard")
    return out


class _Here:
    def __init__(self, repo):
        self.repo = repo

    def resolve(self, repo, commit):
        return self.repo


def test_local_verdict_mechanics_on_a_small_repository(tmp_path, monkeypatch):
    """A recipe whose runner prints sympy-style lines: trust, an agent patch that also edits the test file (reset to
    base before the test patch, as the harness does), a patch that does not apply, and the cached trust check."""
    from codegrep.downstream import verify

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg" / "a.py").write_text("def f():\n    return 1\n")
    (repo / "tests" / "test_a.py").write_text("# tests\n")
    (repo / "runner.py").write_text(
        "import pathlib\nfix = 'return 2' in pathlib.Path('pkg/a.py').read_text()\n"
        "new = 'NEW' in pathlib.Path('tests/test_a.py').read_text()\n"
        "print('test_keep ok')\nprint('test_fix ' + ('ok' if fix and new else 'F'))\n")
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    gold = _diff(repo, {"pkg/a.py": "def f():\n    return 2\n"})
    test_patch = _diff(repo, {"tests/test_a.py": "# tests\nNEW = 1\n"})
    agent = _diff(repo, {"pkg/a.py": "def f():\n    return 2  # agent\n", "tests/test_a.py": "# tests\nmine = 1\n"})
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    monkeypatch.setitem(verify.RECIPES, "o/r", verify.Recipe(here, (), ("runner.py",), "parse_log_sympy"))
    task = Task("o__r-1", "o/r", base, "f should return 2", patch=gold,
                extra={"test_patch": test_patch, "FAIL_TO_PASS": ["test_fix"], "PASS_TO_PASS": '["test_keep"]'})
    v = Verifier(VerifyConfig(python=sys.executable, cache_dir=str(tmp_path / "cache"),
                              env_dir=str(tmp_path / "envs")), resolver=_Here(repo))
    trust = v.trust(task)
    assert trust["trusted"] and trust["gold"]["resolved"] and trust["none"]["f2p_failed"] == ["test_fix"]
    assert len(list((tmp_path / "cache").iterdir())) == 1 and v.trust(task) == trust  # cached
    ok = v.verdict(task, agent, "agent")
    assert ok.resolved is True and ok.trusted and ok.n_tests == 2
    bad = v.verdict(task, agent.replace("return 1", "return 7"), "broken")
    assert bad.resolved is False and "does not apply" in bad.reason
    assert _git(repo, "worktree", "list").count("\n") == 1  # every worktree removed


def test_verify_section_keys_are_checked_by_the_config_module_and_timeout_overrides():
    """``codegrep downstream verify`` and the hint experiment build ``downstream.verify`` the one way
    (``config_from_section`` -> ``codegrep.config.check_keys``), with the config module's wording."""
    from codegrep.config import ConfigError
    from codegrep.downstream.agents import config_from_section
    from codegrep.downstream.verify import VerifyConfig

    with pytest.raises(ConfigError, match=r"^downstream\.verify: unknown key 'timeot' \(did you mean 'timeout'\?\)"):
        config_from_section({"verify": {"timeot": 5}}, "verify", VerifyConfig, "timeout")
    assert config_from_section({"verify": {"timeout": 5}}, "verify", VerifyConfig, "timeout").timeout == 5
    assert config_from_section({"verify": {"timeout": 5}}, "verify", VerifyConfig, "timeout", 7).timeout == 7
    assert config_from_section({}, "verify", VerifyConfig, "timeout", None) == VerifyConfig()

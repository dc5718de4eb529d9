"""Docker-free SWE-bench verdicts where a repository allows them (``codegrep verify``).

A verdict applies a patch (``gold``, ``none`` or a diff file) and the instance's ``test_patch`` to a private
worktree of the snapshot, runs the instance's test files with the repository's own test command in a local
environment, parses the log with the ``swebench`` harness's own log parser and grades FAIL_TO_PASS and
PASS_TO_PASS with the harness's own ``get_eval_tests_report`` / ``get_resolution_status``.

A local verdict is only *trusted* for an instance where the gold patch resolves it and the bare base does not
(``trust``; both runs cached once per instance). Everywhere else the verdict is ``resolved=None`` with the reason
(no local recipe for the repository, no ``test_patch`` in the row, a Python version that cannot import the
snapshot, a missing dependency, a timeout, ...): "unverifiable here", never a guess.

Recipes (``RECIPES``) say, per repository, what the harness's Docker image would provide: the Python version
SWE-bench's specs pin, the pure-Python packages the tests import (copied from the running environment into a
cached site directory, so nothing is downloaded) and the test command. Only ``sympy/sympy`` has one: its tests
need nothing but ``mpmath``. Repositories with compiled extensions (astropy, scikit-learn, matplotlib, ...) need
a build and stay "unverifiable here"; use the Docker harness for them.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from codegrep.data.gitcmd import detached_worktree, run as run_git
from codegrep.data.tasks import Task
from codegrep.files import read_text, write_atomic

RESOLVED_FULL = "RESOLVED_FULL"


@dataclass(frozen=True)
class Recipe:
    """How one repository's tests run outside Docker."""

    python: str
    """Python version the SWE-bench harness image uses for this repository (``3.9`` for sympy)."""
    packages: tuple[str, ...]
    """Pure-Python import packages the tests need, copied from the running environment."""
    test_cmd: tuple[str, ...]
    """The harness's test command (test files are appended), run from the worktree root."""
    parser: str
    """Name of the ``swebench.harness.log_parsers.python`` function that reads the log."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment variables of the harness's test command."""


RECIPES: dict[str, Recipe] = {
    "sympy/sympy": Recipe(python="3.9", packages=("mpmath",), test_cmd=("bin/test", "-C", "--verbose"),
                          parser="parse_log_sympy",
                          env=(("PYTHONWARNINGS", "ignore::UserWarning,ignore::SyntaxWarning"),)),
}


@dataclass
class VerifyConfig:
    """Settings of local verification (the ``downstream.verify`` block of a profile)."""

    python: str | None = None
    """Interpreter to run tests with (None = the recipe's version found on PATH or under pyenv, else this one)."""
    env_dir: str | None = None
    """Where the per-repository site directories are cached (None = ``cache_dir()/verify-envs``)."""
    cache_dir: str | None = None
    """Where per-instance gold/base verdicts are cached (None = ``cache_dir()/verify``)."""
    timeout: int = 900
    """Seconds the test command may run per verdict; longer is "unverifiable here: timeout"."""
    keep_log_chars: int = 4000
    """Characters of the test log kept in a verdict (its tail)."""


@dataclass
class Verdict:
    """One local test run's outcome."""

    instance_id: str
    patch: str
    """``gold``, ``none``, or the patch file / label that was applied."""
    resolved: bool | None
    """True / False from the harness's grading; None = unverifiable here (see ``reason``)."""
    reason: str = ""
    """Why ``resolved`` is None, or a short note (``patch does not apply``)."""
    f2p_failed: list[str] = field(default_factory=list)
    """FAIL_TO_PASS tests that did not pass."""
    p2p_failed: list[str] = field(default_factory=list)
    """PASS_TO_PASS tests that did not pass."""
    n_tests: int = 0
    """Tests the log reported."""
    python: str = ""
    """``major.minor`` of the interpreter used."""
    seconds: float = 0.0
    """Wall time of the test command."""
    trusted: bool | None = None
    """Whether gold resolves and bare base does not on this machine (None = not checked)."""
    log_tail: str = ""
    """The end of the test log."""

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def as_list(value: Any) -> list[str]:
    """FAIL_TO_PASS / PASS_TO_PASS as a list (rows store them as lists or JSON strings).

    >>> as_list('["a", "b"]'), as_list(["c"]), as_list(None)
    (['a', 'b'], ['c'], [])
    """
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return list(json.loads(value))
    return list(value)


def harness_test_paths(test_patch: str) -> list[str]:
    """Files a test patch touches (SWE-bench's test directives for repositories run by path).

    >>> harness_test_paths("diff --git a/sympy/core/tests/test_a.py b/sympy/core/tests/test_a.py\\n--- a/x\\n")
    ['sympy/core/tests/test_a.py']
    """
    return list(dict.fromkeys(re.findall(r"^diff --git a/.* b/(.*)$", test_patch or "", flags=re.M)))


def grade(status_map: dict[str, str], f2p: Sequence[str], p2p: Sequence[str]) -> tuple[bool, list[str], list[str]]:
    """(resolved, FAIL_TO_PASS failures, PASS_TO_PASS failures) by the swebench harness's own grading.

    >>> grade({"test_a": "PASSED", "test_b": "PASSED"}, ["test_a"], ["test_b"])
    (True, [], [])
    >>> grade({"test_a": "FAILED", "test_b": "PASSED"}, ["test_a"], ["test_b", "test_c"])
    (False, ['test_a'], ['test_c'])
    """
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    report = get_eval_tests_report(status_map, {"FAIL_TO_PASS": list(f2p), "PASS_TO_PASS": list(p2p)})
    f2p_bad = [t for t in f2p if t not in report["FAIL_TO_PASS"]["success"]]
    p2p_bad = [t for t in p2p if t not in report["PASS_TO_PASS"]["success"]]
    return get_resolution_status(report) == RESOLVED_FULL, f2p_bad, p2p_bad


def parse_log(recipe: Recipe, log: str) -> dict[str, str]:
    """Test name -> status, by the harness's parser for this repository."""
    from swebench.harness.log_parsers import python as parsers

    return getattr(parsers, recipe.parser)(log, None)


def _version_of(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` (``3.9``) that runs: on PATH, then under ``$PYENV_ROOT/versions``."""
    cands = [shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    cands += sorted(str(p) for p in pyenv.glob(f"{version}*/bin/python{version}"))
    for exe in cands:
        if exe and _version_of(exe) == version:
            return exe
    return None


class LocalTestEnv:
    """A repository's local test environment: an interpreter plus a cached site directory of its packages."""

    def __init__(self, recipe: Recipe, config: VerifyConfig | None = None) -> None:
        from codegrep.config import cache_dir

        self.recipe, self.config = recipe, config or VerifyConfig()
        self.python = self.config.python or find_python(recipe.python) or sys.executable
        self.version = _version_of(self.python) or ""
        root = Path(self.config.env_dir) if self.config.env_dir else cache_dir() / "verify-envs"
        tag = hashlib.sha1(f"{self.python}|{','.join(recipe.packages)}".encode()).hexdigest()[:8]
        self.site = root / f"py{self.version}-{tag}"

    def note(self) -> str:
        """Empty, or why this interpreter differs from the harness's."""
        return "" if self.version == self.recipe.python else (
            f"Python {self.version} here, the harness uses {self.recipe.python}")

    def prepare(self) -> str | None:
        """Build the site directory once (copies of the packages); returns why it cannot, or None."""
        stamp = self.site / ".ready"
        if stamp.is_file():
            return None
        tmp = self.site.with_name(f".{self.site.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for pkg in self.recipe.packages:
            spec = importlib.util.find_spec(pkg)
            if spec is None:
                shutil.rmtree(tmp, ignore_errors=True)
                return f"missing dependency {pkg} (install it into this environment)"
            if spec.submodule_search_locations:
                src = Path(list(spec.submodule_search_locations)[0])
                shutil.copytree(src, tmp / src.name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(spec.origin, tmp / Path(spec.origin).name)
        (tmp / ".ready").write_text(json.dumps({"python": self.python, "packages": list(self.recipe.packages)}))
        try:
            os.replace(tmp, self.site)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
        return None

    def run(self, worktree: Path, files: Sequence[str]) -> tuple[int | None, str, float]:
        """(exit code or None on timeout, log, seconds) of the test command on ``files``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env.update(dict(self.recipe.env), PYTHONPATH=f"{worktree}{os.pathsep}{self.site}",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
        cmd = [self.python, *self.recipe.test_cmd, *files]
        start = time.perf_counter()
        try:
            out = subprocess.run(cmd, cwd=worktree, env=env, capture_output=True, text=True, errors="replace",
                                 timeout=self.config.timeout, start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            log = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return None, log, time.perf_counter() - start
        return out.returncode, out.stdout + out.stderr, time.perf_counter() - start


def patch_text(task: Task, patch: str) -> str:
    """The diff ``patch`` names: ``gold`` (the row's fix), ``none`` (empty) or a file path."""
    if patch == "gold":
        return task.patch
    if patch == "none":
        return ""
    p = Path(patch)
    if not p.exists():
        raise FileNotFoundError(f"--patch: no such file {p} (use gold, none or a diff file)")
    return read_text(p, "--patch")  # a directory is said as such, not 'no such file'


def _apply(worktree: Path, diff: str, what: str) -> str | None:
    if not diff.strip():
        return None
    out = run_git("apply", "--whitespace=nowarn", "-", cwd=worktree, input=diff, text=True, check=False)
    if out.returncode:
        out = subprocess.run(["patch", "-p1", "--batch", "--forward"], cwd=worktree, input=diff, text=True,
                             capture_output=True)  # the harness falls back to GNU patch too
    return None if out.returncode == 0 else f"{what} does not apply: {(out.stderr or out.stdout).strip()[:200]}"


class Verifier:
    """Local verdicts for tasks of repositories with a recipe; caches gold/base runs per instance."""

    def __init__(self, config: VerifyConfig | None = None, resolver: Any = None) -> None:
        from codegrep.config import cache_dir

        self.config = config or VerifyConfig()
        self.resolver = resolver
        self.cache = Path(self.config.cache_dir) if self.config.cache_dir else cache_dir() / "verify"
        self._envs: dict[str, LocalTestEnv] = {}

    def _git_dir(self, task: Task) -> Path:
        if self.resolver is None:
            from codegrep.data.repos import RepoResolver

            self.resolver = RepoResolver()
        return Path(self.resolver.resolve(task.repo, task.base_commit))

    def unverifiable(self, task: Task) -> str | None:
        """Why no local verdict is possible for ``task`` at all, or None."""
        if task.repo not in RECIPES:
            return f"no local recipe for {task.repo} (needs the Docker harness)"
        if not (task.extra.get("test_patch") or "").strip():
            return "the task row has no test_patch"
        if not as_list(task.extra.get("FAIL_TO_PASS")):
            return "the task row has no FAIL_TO_PASS tests"
        return None

    def env_for(self, task: Task) -> LocalTestEnv:
        if task.repo not in self._envs:
            self._envs[task.repo] = LocalTestEnv(RECIPES[task.repo], self.config)
        return self._envs[task.repo]

    def run(self, task: Task, patch: str, label: str | None = None) -> Verdict:
        """Apply ``patch`` (a diff text) and the test patch, run the tests, grade; never raises on test failure."""
        label = label or "patch"
        why = self.unverifiable(task)
        if why:
            return Verdict(task.instance_id, label, None, why)
        env = self.env_for(task)
        why = env.prepare()
        if why:
            return Verdict(task.instance_id, label, None, why, python=env.version)
        git_dir = self._git_dir(task)
        with tempfile.TemporaryDirectory(prefix="codegrep-verify-") as tmp:
            with detached_worktree(git_dir, Path(tmp) / "repo", task.base_commit) as wt:
                return self._run_in(task, patch, label, env, wt)

    def _run_in(self, task: Task, patch: str, label: str, env: LocalTestEnv, wt: Path) -> Verdict:
        test_patch = task.extra["test_patch"]
        bad = _apply(wt, patch, "the patch")
        if bad:  # an agent's patch that does not apply is a failed fix, as in the harness
            return Verdict(task.instance_id, label, False, bad, python=env.version)
        for path in harness_test_paths(test_patch):  # as the harness: test files back to base, then the test patch
            if run_git("checkout", "HEAD", "--", path, cwd=wt, check=False).returncode:
                (wt / path).unlink(missing_ok=True)  # not in base: a file the patch created at that path goes
        bad = _apply(wt, test_patch, "the test_patch")
        if bad:
            return Verdict(task.instance_id, label, None, bad, python=env.version)
        code, log, secs = env.run(wt, harness_test_paths(test_patch))
        tail = log[-self.config.keep_log_chars:]
        if code is None:
            return Verdict(task.instance_id, label, None, f"timeout after {self.config.timeout}s",
                           python=env.version, seconds=secs, log_tail=tail)
        status = parse_log(env.recipe, log)
        f2p, p2p = as_list(task.extra.get("FAIL_TO_PASS")), as_list(task.extra.get("PASS_TO_PASS"))
        if not status:
            last = [ln for ln in log.strip().splitlines() if ln.strip()][-1:] or [f"exit code {code}"]
            return Verdict(task.instance_id, label, None, f"no test results in the log ({env.note() or 'error'}): "
                           f"{last[0][:200]}", python=env.version, seconds=secs, log_tail=tail)
        ok, f2p_bad, p2p_bad = grade(status, f2p, p2p)
        return Verdict(task.instance_id, label, ok, env.note(), f2p_bad, p2p_bad, len(status), env.version, secs,
                       log_tail=tail)

    # --- trust: gold resolves and the bare base does not ------------------------------------------
    def _cache_path(self, task: Task) -> Path:
        env = self.env_for(task)
        raw = f"{task.base_commit}|{task.patch}|{task.extra.get('test_patch')}|{env.python}|{env.recipe}"
        return self.cache / f"{task.instance_id}-{hashlib.sha1(raw.encode()).hexdigest()[:10]}.json"

    def trust(self, task: Task) -> dict[str, Any]:
        """``{"trusted": bool, "reason": str, "gold": Verdict row, "none": Verdict row}``, cached per instance."""
        why = self.unverifiable(task)
        if why:
            return {"instance_id": task.instance_id, "trusted": False, "reason": why, "gold": None, "none": None}
        path = self._cache_path(task)
        if path.is_file():
            return json.loads(path.read_text())
        gold, none = self.run(task, task.patch, "gold"), self.run(task, "", "none")
        if gold.resolved is None or none.resolved is None:
            reason = f"gold: {gold.reason}" if gold.resolved is None else f"base: {none.reason}"
        elif not gold.resolved:
            reason = ("gold patch does not resolve here (failing: "
                      f"{(gold.f2p_failed + gold.p2p_failed)[:3]}{'; ' + gold.reason if gold.reason else ''})")
        elif none.resolved:
            reason = "the bare base already passes FAIL_TO_PASS here"
        else:
            reason = ""
        out = {"instance_id": task.instance_id, "trusted": not reason, "reason": reason,
               "gold": gold.to_row(), "none": none.to_row()}
        write_atomic(path, json.dumps(out))
        return out

    def verdict(self, task: Task, patch: str, label: str) -> Verdict:
        """A trusted verdict for ``patch``, or ``resolved=None`` with the reason the instance is unverifiable."""
        t = self.trust(task)
        if not t["trusted"]:
            return Verdict(task.instance_id, label, None, f"unverifiable here: {t['reason']}", trusted=False)
        if label in ("gold", "none"):
            v = Verdict(**t[label])
        else:
            v = self.run(task, patch, label)
            if v.resolved is None:
                v.reason = f"unverifiable here: {v.reason}"
        v.trusted = True
        return v

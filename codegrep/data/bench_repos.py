"""Benchmark repositories: the one module that builds the repositories the ``codegrep bench ...`` commands time.

Three shapes, one per benchmark, each kept byte-identical to what its benchmark measured before (issue 26):

* ``package_repo`` / ``synthetic_repo`` (``bench env``): a bare repository of an installed package's source (or of
  generated modules) with ``commits`` small successive commits, so groups of rollouts can use distinct commits;
* ``python_files_dir`` (``bench retrieve``): a plain directory (no git) of the first ``n_files`` ``.py`` files of
  installed packages;
* ``stdlib_repository`` (``bench mcp``): a cached git work tree of the running interpreter's standard library.

They share the file copy (``copy_files``) and the commit loop (``commit_work``); what differs (file selection,
layout, identity) is explicit.
"""
from __future__ import annotations

import random
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

from codegrep.config import cache_dir
from codegrep.data.gitcmd import git, resolve_commit, run as run_git

ENV_IDENTITY = ("-c", "user.name=codegrep-bench", "-c", "user.email=bench@codegrep.invalid", "-c",
                "commit.gpgSign=false")
"""Commit identity of the ``bench env`` repositories."""
MCP_IDENTITY = ("-c", "user.name=bench", "-c", "user.email=bench@codegrep")
"""Commit identity of the ``bench mcp`` repository."""
MAX_FILE_BYTES = 500_000
"""Size cut of the ``bench retrieve`` (larger files left out) and ``bench mcp`` (this large or larger left out)
repositories."""
_SKIP_PARTS = {"site-packages", "__pycache__", ".git"}
_BINARY_SUFFIXES = {".pyc", ".so", ".pem", ".au", ".aiff", ".wav", ".gz", ".zip", ".bz2", ".xz"}


def commit_work(work: Path, messages: Sequence[str], identity: Sequence[str], revision_file: str | None = None) -> None:
    """``git init`` ``work`` and commit everything in it once per message; with ``revision_file``, that file is
    (re)written with the commit's index before each commit, so successive commits differ."""
    run_git("init", "-q", str(work))
    for c, message in enumerate(messages):
        if revision_file:
            (work / revision_file).write_text(f"{c}\n")
        git(work, "add", "-A")
        git(work, *identity, "commit", "-q", "-m", message)


def copy_files(files: Iterable[Path], src: Path, dest: Path) -> None:
    """Copy each file under ``src`` to the same relative path under ``dest`` (contents only)."""
    for path in files:
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


# ----------------------------------------------------------------------------- bench env
def _bare_from(work: Path, dest: Path, commits: int) -> tuple[Path, str]:
    commit_work(work, [f"bench {c}" for c in range(max(1, commits))], ENV_IDENTITY, revision_file="BENCH_REVISION")
    run_git("clone", "-q", "--bare", str(work), str(dest))
    return dest, resolve_commit(dest, "HEAD")


def package_repo(dest: Path, package: str = "sympy", commits: int = 8) -> tuple[Path, str]:
    """A bare repository of an installed package's source (sympy: ~1.6K files, the size of sphinx),
    with ``commits`` small successive commits so groups can use distinct base commits."""
    from codegrep.data.default_set import package_dir

    dest = Path(dest)
    if (dest / "HEAD").exists():
        return dest, resolve_commit(dest, "HEAD")
    src = package_dir(package)
    if src is None:
        raise FileNotFoundError(f"package {package!r} is not installed; pass --repo GIT_DIR --commit SHA")
    with tempfile.TemporaryDirectory(prefix="codegrep-bench-") as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(src, work / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
        return _bare_from(work, dest, commits)


def synthetic_repo(dest: Path, n_files: int = 200, commits: int = 4, seed: int = 0) -> tuple[Path, str]:
    """A small bare repository of generated Python modules (for tests and the ci profile)."""
    dest = Path(dest)
    if (dest / "HEAD").exists():
        return dest, resolve_commit(dest, "HEAD")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="codegrep-synth-") as tmp:
        work = Path(tmp) / "w"
        for i in range(n_files):
            path = work / f"pkg{i % 10}" / f"mod_{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            body = [f"def func_{i}_{j}(x):\n    return x * {rng.randint(1, 99)}  # token_{rng.randint(0, 999)}\n"
                    for j in range(20)]
            path.write_text(f'"""Module {i}."""\nimport os\n\n' + "\n".join(body))
        return _bare_from(work, dest, commits)


# ----------------------------------------------------------------------------- bench retrieve
def python_files_dir(n_files: int, dest: Path, modules: Sequence[str]) -> int:
    """Copy the first ``n_files`` ``.py`` files (sorted, per module in the order given; caches and files larger
    than ``MAX_FILE_BYTES`` left out) of the installed ``modules`` into ``dest/<module>/``; returns how many."""
    from codegrep.data.default_set import package_dir

    copied = 0
    for module in modules:
        root = package_dir(module)
        if root is None:
            continue
        chosen = []
        for path in sorted(root.rglob("*.py")):
            if copied + len(chosen) >= n_files:
                break
            if "__pycache__" in path.parts or path.stat().st_size > MAX_FILE_BYTES:
                continue
            chosen.append(path)
        copy_files(chosen, root, dest / module)
        copied += len(chosen)
        if copied >= n_files:
            break
    return copied


# ----------------------------------------------------------------------------- bench mcp
def stdlib_files(src: Path, n_files: int) -> list[Path]:
    """Up to ``n_files`` text files of ``src``: all ``.py`` first, then other small files, sorted."""
    files = [p for p in sorted(src.rglob("*")) if p.is_file() and not p.is_symlink()
             and not _SKIP_PARTS.intersection(p.relative_to(src).parts) and p.stat().st_size < MAX_FILE_BYTES
             and p.suffix not in _BINARY_SUFFIXES]
    return sorted(files, key=lambda p: (p.suffix != ".py", str(p)))[:n_files]


def stdlib_repository(n_files: int = 2000) -> Path:
    """The cached git repository of ``n_files`` standard-library files (built once per Python version)."""
    from tqdm import tqdm

    src = Path(sysconfig.get_paths()["stdlib"])
    repo = cache_dir() / "bench" / f"mcp-stdlib-py{sys.version_info.major}.{sys.version_info.minor}-{n_files}"
    if (repo / ".git" / "codegrep-complete").exists():
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    files = stdlib_files(src, n_files)
    copy_files(tqdm(files, desc="bench repo", unit="file", file=sys.stderr), src, repo / "Lib")
    commit_work(repo, [f"{len(files)} files of the Python {sys.version.split()[0]} standard library"], MCP_IDENTITY)
    (repo / ".git" / "codegrep-complete").write_text(str(len(files)))
    return repo

"""The offline default task set: docstring-localisation tasks over installed pure-Python packages.

Each source package below is a direct dependency of codegrep, so its source is present wherever
codegrep is installed. Its ``.py`` files are committed into a local git repository
``codegrep-default__<name>`` with a fixed author, committer and date, so the commit SHA depends
only on the installed version. Tasks: the first paragraph of a function's or class's docstring
(written by the package's authors) is the issue text; every selected docstring is removed from the
committed snapshot, so the text cannot be grepped verbatim; the defining file is the gold file and
``patch`` is a real unified diff that restores the docstring. Train/eval is split by repository.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import random
import re
import shutil
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from codegrep.config import cache_dir
from codegrep.errors import UserError
from codegrep.files import atomic_write, write_atomic
from codegrep.data.paths import is_test_path
from codegrep.data.repos import commit_snapshot
from codegrep.data.docstrings import (Docstring, find_docstrings, mask_code_names, plain_words, restore_diff,
                                      strip_docstrings)

BUILD_VERSION = "1"
"""Bump when the construction changes; part of the cache key together with the package versions."""


@dataclass(frozen=True)
class SourcePackage:
    """One installed package turned into one repository."""

    module: str
    """Top-level import directory (e.g. ``_pytest``)."""
    dist: str
    """Distribution name used for the version pin and the repository name."""
    split: str
    """``train`` or ``eval``; the split is by repository so no repository is in both."""


SOURCE_PACKAGES: tuple[SourcePackage, ...] = (
    SourcePackage("_pytest", "pytest", "train"),
    SourcePackage("git", "GitPython", "eval"),
    SourcePackage("datasets", "datasets", "train"),
    SourcePackage("accelerate", "accelerate", "train"),
    SourcePackage("trl", "trl", "train"),
    SourcePackage("tqdm", "tqdm", "eval"),
    SourcePackage("nbformat", "nbformat", "eval"),
    SourcePackage("papermill", "papermill", "eval"),
    SourcePackage("mcp", "mcp", "eval"),
)


@dataclass(frozen=True)
class SelectionConfig:
    """Knobs that set how many tasks there are and how hard they are (see docs/data.md)."""

    min_words: int = 15
    """Fewest plain (unmasked) words in the issue paragraph (shorter ones are too vague to localise)."""
    max_words: int = 80
    """Most words in the paragraph (longer ones read like documentation pages, not issues)."""
    mask_code_names: bool = True
    """Replace identifiers in the paragraph by `...` (the main difficulty knob: names make BM25 easy)."""
    max_per_file: int = 3
    """Cap on tasks per file so one large module does not dominate."""
    max_per_repo: int = 80
    """Cap on tasks per repository (seeded sample), so repositories weigh alike."""
    seed: int = 0
    """Seed of the per-repository sample."""


DEFAULT_SELECTION = SelectionConfig()

ISSUE_TEMPLATE = "Find the code described below (its docstring was removed from the source):\n\n{paragraph}\n"
MASKED_NOTE = "\n(Code names in the description are masked as `...`.)\n"
"""Issue text around the authors' paragraph; kept short so its own words barely move BM25."""


@dataclass(frozen=True)
class DefaultSet:
    """Where a built default task set lives."""

    tasks_path: Path
    """``tasks.jsonl`` in the SWE-bench schema (plus ``gold_files`` and ``extra`` fields)."""
    repos_dir: Path
    """Directory of ``owner__name`` git repositories, usable as ``--repos``."""


def package_dir(module: str) -> Path | None:
    """The source directory of an installed package (None when it is not installed or not a package); the default
    task set reads its sources, ``codegrep.env.bench`` commits them as a benchmark repository.

    >>> package_dir("codegrep.data").name, package_dir("no_such_package_xyz"), package_dir("json.decoder")
    ('data', None, None)
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _package_dir(pkg: SourcePackage) -> Path:
    src = package_dir(pkg.module)
    if src is None:
        raise RuntimeError(f"default task set: package {pkg.module!r} ({pkg.dist}) is not installed")
    return src


REPO_PREFIX = "codegrep-default/"
"""Repository names of the default set's docstring tasks start with this."""


def _repo_name(pkg: SourcePackage) -> str:
    return REPO_PREFIX + re.sub(r"[^a-z0-9]+", "-", pkg.dist.lower())


def task_kind(repo: str) -> str:
    """``docstring`` for the default set's tasks (an English description of removed code), ``real`` for every
    other task (a real issue text, e.g. a SWE-bench row).

    >>> task_kind("codegrep-default/pytest"), task_kind("sympy/sympy")
    ('docstring', 'real')
    """
    return "docstring" if repo.startswith(REPO_PREFIX) else "real"


def installed_versions() -> dict[str, str]:
    """``{dist: version}`` of every source package (what pins the default set)."""
    return {p.dist: md.version(p.dist) for p in SOURCE_PACKAGES}


def _builder_source_hash() -> str:
    """Hash of the code that builds the set, so a changed construction never reuses a stale cache."""
    from codegrep.data import docstrings, paths

    text = b"".join(Path(m.__file__).read_bytes() for m in (docstrings, paths, __import__(__name__, fromlist=["_"])))
    return hashlib.sha256(text).hexdigest()[:16]


def version_hash(selection: SelectionConfig = DEFAULT_SELECTION) -> str:
    """Cache key: construction version and code, selection knobs and installed versions."""
    key = json.dumps([BUILD_VERSION, _builder_source_hash(), asdict(selection), installed_versions()],
                     sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _read_sources(pkg_dir: Path, module: str) -> dict[str, str]:
    """Repository-relative path -> text of every ``.py`` file (sorted; undecodable files skipped)."""
    files: dict[str, str] = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        try:
            files[f"{module}/{path.relative_to(pkg_dir).as_posix()}"] = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
    return files


def _candidates(files: dict[str, str], sel: SelectionConfig) -> list[Docstring]:
    """Every eligible docstring, with paragraphs unique in the repository."""
    found: list[Docstring] = []
    for rel, text in files.items():
        if not is_test_path(rel):
            found.extend(find_docstrings(rel, text))
    counts: dict[str, int] = {}
    for d in found:
        counts[d.paragraph] = counts.get(d.paragraph, 0) + 1
    return [d for d in found if counts[d.paragraph] == 1 and not d.name.startswith("__")
            and len(d.paragraph.split()) <= sel.max_words and plain_words(issue_paragraph(d, sel)) >= sel.min_words
            and ">>>" not in d.paragraph]


def issue_paragraph(d: Docstring, sel: SelectionConfig) -> str:
    """The authors' paragraph as the issue shows it (identifiers masked when the knob says so)."""
    return mask_code_names(d.paragraph) if sel.mask_code_names else d.paragraph


def issue_text(d: Docstring, sel: SelectionConfig) -> str:
    """The full problem statement of a task."""
    text = ISSUE_TEMPLATE.format(paragraph=issue_paragraph(d, sel))
    return text + MASKED_NOTE if sel.mask_code_names and issue_paragraph(d, sel) != d.paragraph else text


def _select(cands: list[Docstring], sel: SelectionConfig) -> list[Docstring]:
    per_file: dict[str, list[Docstring]] = {}
    for d in cands:
        per_file.setdefault(d.path, []).append(d)
    rng = random.Random(sel.seed)
    capped = [d for path in sorted(per_file)
              for d in sorted(rng.sample(per_file[path], min(sel.max_per_file, len(per_file[path]))),
                              key=lambda d: d.lineno)]
    if len(capped) > sel.max_per_repo:
        keep = set(id(d) for d in rng.sample(capped, sel.max_per_repo))
        capped = [d for d in capped if id(d) in keep]
    return capped


def _still_greppable(chosen: list[Docstring], stripped: dict[str, str]) -> set[int]:
    """Indices of tasks whose docstring's first line, or its paragraph, still occurs in the snapshot."""
    corpus = "\n".join(stripped.values())
    flat = " ".join(corpus.split())
    return {i for i, d in enumerate(chosen) if d.first_line in corpus or d.paragraph in flat}


def build_package(pkg: SourcePackage, repos_dir: Path, sel: SelectionConfig) -> list[dict]:
    """Commit one package's stripped snapshot and return its task rows."""
    files = _read_sources(_package_dir(pkg), pkg.module)
    chosen = _select(_candidates(files, sel), sel)
    while True:  # dropping a task restores its docstring, so re-check until stable
        stripped = {rel: strip_docstrings(text, [d for d in chosen if d.path == rel]) for rel, text in files.items()}
        bad = _still_greppable(chosen, stripped)
        if not bad:
            break
        chosen = [d for i, d in enumerate(chosen) if i not in bad]
    repo = _repo_name(pkg)
    version = md.version(pkg.dist)
    sha = commit_snapshot(repos_dir / repo.replace("/", "__"), stripped,
                          f"{pkg.dist} {version} with {len(chosen)} docstrings removed (codegrep default set)")
    rows = []
    for i, d in enumerate(chosen):
        others = [o for o in chosen if o.path == d.path and o is not d]
        patch = restore_diff(d.path, stripped[d.path], strip_docstrings(files[d.path], others))
        rows.append({"instance_id": f"{repo.replace('/', '__')}-{i:04d}", "repo": repo, "base_commit": sha,
                     "problem_statement": issue_text(d, sel),
                     "patch": patch, "gold_files": [d.path], "split": pkg.split, "package": pkg.dist,
                     "package_version": version, "symbol": d.qualname, "symbol_kind": d.kind})
    return rows


def build_default_set(out_dir: Path, selection: SelectionConfig = DEFAULT_SELECTION) -> DefaultSet:
    """Build the set into ``out_dir`` (``tasks.jsonl`` + ``repos/``); same bytes on every build."""
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    repos_dir = out_dir / "repos"
    repos_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for pkg in tqdm(SOURCE_PACKAGES, desc="default task set", unit="repo"):
        rows.extend(build_package(pkg, repos_dir, selection))
    tasks_path = out_dir / "tasks.jsonl"
    with atomic_write(tasks_path, "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    info = {"build_version": BUILD_VERSION, "hash": version_hash(selection), "packages": installed_versions(),
            "selection": asdict(selection), "n_tasks": len(rows)}
    write_atomic(out_dir / "BUILD_INFO.json", json.dumps(info, indent=2, sort_keys=True) + "\n")
    return DefaultSet(tasks_path, repos_dir)


def _is_built(out_dir: Path, selection: SelectionConfig) -> bool:
    info = out_dir / "BUILD_INFO.json"
    return info.is_file() and json.loads(info.read_text()).get("hash") == version_hash(selection)


def ensure_default_task_set(out_dir: str | os.PathLike | None = None,
                            selection: SelectionConfig = DEFAULT_SELECTION) -> DefaultSet:
    """The default set, built once and cached under ``cache_dir()/default_set/<version-hash>``.

    With ``out_dir`` the set is built there (reused when already built with the same hash;
    a non-empty directory holding something else is an error).
    """
    target = Path(out_dir) if out_dir is not None else cache_dir() / "default_set" / version_hash(selection)
    if _is_built(target, selection):
        return DefaultSet(target / "tasks.jsonl", target / "repos")
    if target.exists() and any(target.iterdir()):
        if out_dir is not None:
            raise ValueError(f"{target} is not empty and holds no default task set with hash "
                                  f"{version_hash(selection)}; pass an empty or new directory")
        shutil.rmtree(target)  # a stale or half-written cache entry
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        build_default_set(tmp, selection)
    except OSError as exc:  # the hidden working directory cannot be written: name the directory the user gave
        shutil.rmtree(tmp, ignore_errors=True)
        if not str(getattr(exc, "filename", None) or "").startswith(str(tmp)):
            raise
        raise UserError(f"{target}: cannot write ({exc.strerror or exc}); nothing was written") from None
    try:
        if target.exists():
            target.rmdir()
        tmp.rename(target)  # atomic: concurrent builders race harmlessly
    except OSError:
        if not _is_built(target, selection):
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return DefaultSet(target / "tasks.jsonl", target / "repos")

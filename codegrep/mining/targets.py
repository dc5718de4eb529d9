"""Which changed files are supervision (``target_files``) and which are what agents leave behind.

Rules (documented in docs/mining.md):
  * test      - a test folder of the project's one rule (``codegrep.data.paths.TEST_DIRS``: ``tests``, ``test``,
                ``testing``, ``__tests__``, ``spec`` ...), or ``test_*.py``, ``*_test(s).py``, ``test(s).py``,
                ``conftest.py`` (a file a run wrote: wider than the rule for repository files), or a source file
                that rule calls a test (``*_test.go``, ``*.spec.ts``, ``FooTest.java`` ...);
  * build/CI  - packaging and CI config (``setup.py``, ``pyproject.toml``, ``tox.ini``, ``.github/`` ...);
  * artifact  - editor/patch leftovers and data files (``.orig``, ``.rej``, ``.bak``, ``.log``, ``*_new`` ...);
  * scratch   - a file new in the patch (or created by the agent) whose name or directory says reproduction
                or debugging (``reproduce*``, ``repro*``, ``debug*``, ``scratch``, ``verify*`` ...; ``check_*``,
                ``temp``, ``my_*`` ... only outside a directory the run knew from the repository),
                or that lies at the repository top level, or in a top-level directory the run never saw
                except through new files (``migrations/0001_initial.py`` made by a reproduction script).
"""
from __future__ import annotations

import posixpath
import re

from codegrep.data.paths import SOURCE_SUFFIXES, is_test_dir, is_test_path, suffix_alternation
from codegrep.data.tasks import patch_changes

_TEST_FILE = re.compile(r"^(test_.*\.py|.*_tests?\.py|tests?\.py|conftest\.py)$")
_BUILD_FILES = {"setup.py", "setup.cfg", "pyproject.toml", "tox.ini", "noxfile.py", "makefile", "manifest.in",
                "pytest.ini", ".coveragerc", ".gitignore", ".gitattributes", "environment.yml", "environment.yaml",
                ".pre-commit-config.yaml", "azure-pipelines.yml", ".travis.yml", "appveyor.yml", "pipfile",
                "dockerfile", ".readthedocs.yml", ".readthedocs.yaml"}  # (manifests and lock files: _MANIFESTS)
_MANIFESTS = {"package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "tsconfig.json", "go.mod", "go.sum",
              "cargo.toml", "cargo.lock", "pom.xml", "build.gradle", "build.gradle.kts", "settings.gradle",
              "gemfile", "gemfile.lock", "composer.json", "composer.lock", "poetry.lock", "pipfile.lock", "uv.lock"}
"""Package manifests and lock files: build config wherever they sit (a monorepo's ``packages/x/package.json``, a
Rust workspace's ``crates/x/Cargo.toml``, a Go submodule's ``go.mod``)."""
_BUILD_DIRS = {".github", ".circleci", ".azure-pipelines", ".ci", "ci", ".gitlab"}
_GENERATED_DIRS = {"_build", "build", "dist", "__pycache__", ".tox", ".git", "node_modules", "site-packages", ".eggs",
                   ".pytest_cache", ".mypy_cache", "htmlcov"}
_ARTIFACT = re.compile(r"(\.(orig|rej|bak|log|pyc|swp|tmp|out|patch|diff|hdf5|h5|npy|npz|pkl|pickle|sqlite3?|db)"
                       r"|[._](new|old|backup|copy))$", re.I)
_SOURCE = re.compile(r"\.(?:" + suffix_alternation(SOURCE_SUFFIXES) + r")$")
_SCRATCH = re.compile(r"(^|[_\-.])(reproduc\w*|repro|debug\w*|scratch\w*|verify\w*|verification|edge_?cases?|sanity)"
                      r"([_\-.\d]|$)", re.I)
"""Words of an agent's own scripts, wherever the file lies."""
_SCRATCH_WEAK = re.compile(r"(^|[_\-.])(temp|tmp|check|demo|manual|minimal|my)([_\-.\d]|$)", re.I)
"""Words of scratch files that are also ordinary module words (``check.py``, ``temp_units.py``, ``my_widget.py``):
scratch only outside a directory the run knew from the repository (``looks_scratch``)."""


def is_test(path: str) -> bool:
    """Python's conventions below, and for source files every language's of the project's one rule
    (``codegrep.data.paths``): a Go, JS/TS or Java run's test files are tests too, never targets (a
    ``test_plot.png`` a script wrote stays what the other rules make it: scratch).

    >>> is_test("pkg/tests/x.py"), is_test("test_thing.py"), is_test("pkg/conftest.py"), is_test("pkg/a.py")
    (True, True, True, False)
    >>> is_test("auth/token_test.go"), is_test("src/cart.spec.ts"), is_test("src/cart.test.js"), is_test("auth/token.go")
    (True, True, True, False)
    >>> is_test("spec/models/user_spec.rb"), is_test("src/__tests__/cart.js"), is_test("Shop/CartTests.cs")
    (True, True, True)
    >>> is_test("lib/cart_test.exs"), is_test("src/cart_spec.lua"), is_test("lib/cart.exs")  # every source language
    (True, True, False)
    >>> is_test("internal/parse/testdata/dates.golden"), is_test("src/__snapshots__/Cart.test.tsx.snap")
    (True, True)
    >>> is_test("app/src/androidTest/assets/fixture.json")  # a test source set's data, as is_test_path says
    True
    """
    parts = path.split("/")
    return any(map(is_test_dir, parts[:-1])) or bool(_TEST_FILE.match(parts[-1])) \
        or bool(_SOURCE.search(parts[-1]) and is_test_path(path))


def is_build_config(path: str) -> bool:
    """
    >>> is_build_config("setup.py"), is_build_config(".github/workflows/ci.yml"), is_build_config("pkg/setup.py")
    (True, True, False)
    >>> is_build_config("go.mod"), is_build_config("package.json"), is_build_config("Cargo.lock")
    (True, True, True)
    >>> is_build_config("packages/ui/package.json"), is_build_config("crates/core/Cargo.toml"), is_build_config("pkg/go.py")
    (True, True, False)
    """
    parts = path.split("/")
    return parts[-1].lower() in _MANIFESTS or parts[0] in _BUILD_DIRS or (len(parts) == 1 and (
        parts[0].lower() in _BUILD_FILES or parts[0].lower().startswith("requirements")))


def is_artifact(path: str) -> bool:
    """Leftovers and generated output (build trees, caches, ``.egg-info``).

    >>> is_artifact("pkg/a.py.orig"), is_artifact("pkg/a.py_new"), is_artifact("docs/_build/x.html"), is_artifact("a.py")
    (True, True, True, False)
    """
    parts = path.split("/")
    return bool(_ARTIFACT.search(path)) or any(p in _GENERATED_DIRS or p.endswith(".egg-info") for p in parts[:-1])


def looks_scratch(path: str, known_dirs: frozenset[str] = frozenset()) -> bool:
    """A reproduction/debug name anywhere in the path; a word that ordinary modules also use (``_SCRATCH_WEAK``:
    ``check``, ``temp``, ``my`` ...) only where the file's directory is not one of ``known_dirs``, the directories
    the run knew from the repository (a new ``pkg/check.py`` beside the package's files is a module).

    >>> looks_scratch("reproduce_issue.py"), looks_scratch("reproduce_app/models.py"), looks_scratch("pkg/checker.py")
    (True, True, False)
    >>> looks_scratch("pkg/check_units.py"), looks_scratch("pkg/check_units.py", frozenset({"pkg"}))
    (True, False)
    >>> looks_scratch("pkg/debug_fix.py", frozenset({"pkg"})), looks_scratch("pkg/my_app/models.py", frozenset({"pkg"}))
    (True, True)
    """
    parts = [posixpath.splitext(p)[0] for p in path.split("/")]
    weak = posixpath.dirname(path) not in known_dirs
    return any(_SCRATCH.search(p) or (weak and _SCRATCH_WEAK.search(p)) for p in parts)


def new_files(patch: str) -> set[str]:
    """Files a diff creates.

    >>> sorted(new_files("diff --git a/x.py b/x.py\\nnew file mode 100644\\n--- /dev/null\\n+++ b/x.py\\n"
    ...                  "diff --git a/y.py b/y.py\\nindex 1..2\\n--- a/y.py\\n+++ b/y.py\\n"))
    ['x.py']
    """
    return {c.new for c in patch_changes(patch or "") if c.old is None and c.new}


def classify(path: str, new: bool, agent_created: bool, known_dirs: frozenset[str] = frozenset()) -> str:
    """``target``, or the reason a changed file is not supervision: test, build, artifact, scratch. ``known_dirs``:
    every leading part (``pkg``, ``pkg/sub``) of the repository paths the run accessed or the diff modifies.

    >>> classify("pkg/a.py", False, False), classify("repro.py", True, True), classify("newmod.py", True, True)
    ('target', 'scratch', 'scratch')
    >>> classify("pkg/sub/new_feature.py", True, True), classify("docs/conf.py", False, False)
    ('target', 'target')
    >>> classify("migrations/0001_initial.py", True, False, frozenset({"django"}))
    'scratch'
    >>> classify("pkg/units/temp.py", True, True, frozenset({"pkg", "pkg/units"}))
    'target'

    """
    if is_test(path):
        return "test"
    if is_build_config(path):
        return "build"
    if is_artifact(path):
        return "artifact"
    fresh = new or agent_created
    if fresh and (looks_scratch(path, known_dirs) or "/" not in path
                  or (known_dirs and path.split("/")[0] not in known_dirs)):
        return "scratch"
    return "target"

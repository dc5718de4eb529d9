"""What a test file is: the one rule every area uses (the default task set leaves test files out of its
candidates, retrievers down-weight them, the grep view lists source before tests).

The default set's earlier rule (a ``tests``/``test``/``testing`` folder, or a name starting ``test_`` or
``conftest``) and this one agree on every ``.py`` file of the nine installed source packages (measured when they
were unified, issue 26: 0 files differ, 405 tasks before and after, the same ones)."""
from __future__ import annotations

import re

SOURCE_SUFFIXES = (".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".java", ".kt",
                   ".scala", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".rb", ".php", ".cs", ".swift", ".m",
                   ".jl", ".r", ".lua", ".pl", ".sh", ".f", ".f90", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte",
                   ".dart", ".hs", ".ex", ".exs", ".erl", ".ml", ".mli", ".clj", ".cljs", ".groovy", ".kts", ".cu",
                   ".cuh", ".zig", ".mm", ".hh", ".hxx", ".inl", ".ipp", ".tpp", ".pm", ".rake", ".gemspec", ".erb",
                   ".fs", ".fsx", ".vb", ".cshtml", ".razor")
"""Source-code suffixes: what the retrievers index by default, what mining's other-language test rule and the
downstream replay's path finder recognise (docs, notebooks, data and config files are not source). C++'s inline and
template bodies (``.inl``, ``.ipp``, ``.tpp``), Perl's modules (``.pm``: a Perl library is nothing else), Ruby's rake
tasks, gemspecs and ERB views, F#, VB.NET and Razor views count too."""


def suffix_alternation(suffixes: tuple[str, ...]) -> str:
    r"""A regex alternation of ``suffixes`` without their dots, longest first, so a shorter suffix never wins where
    a longer one matches (``cpp`` before ``c``, ``tsx`` before ``ts``); the one way every path regex here is built.

    >>> suffix_alternation((".c", ".py", ".cpp"))
    'cpp|py|c'
    >>> import re; re.fullmatch(rf"\w+\.(?:{suffix_alternation(SOURCE_SUFFIXES)})", "App.tsx") is not None
    True
    """
    return "|".join(re.escape(s.lstrip(".")) for s in sorted(suffixes, key=lambda s: (-len(s), s)))


TEST_DIRS = frozenset({"test", "tests", "testing", "unittests", "__tests__", "spec", "specs", "testdata",
                       "__snapshots__", "t", "xt"})
"""Folder names whose files are tests or their data, wherever they sit in the path (``__tests__``: Jest; ``spec``:
RSpec, Jasmine; ``testdata``: the go tool's fixtures; ``__snapshots__``: Jest's recorded outputs; ``t``, ``xt``:
Perl's (and git's) TAP tests, author tests and their ``t/lib`` helpers). Not Rust's ``benches/``: benchmark code, not
tests (a Rust crate's integration tests are its ``tests/``)."""
_SOURCE_SET_TEST = re.compile(r"^(?:[a-z][A-Za-z]*Test|[A-Z][\w.]*\.(?:[A-Z][a-z]+)?Tests?|(?:[A-Z][A-Za-z]*)?Tests)$")
"""Kotlin Multiplatform and Android source sets of tests (``commonTest/``, ``jvmTest/``, ``androidTest/``), .NET test
projects (``Newtonsoft.Json.Tests/``, ``Shop.UnitTests/``), SwiftPM/Xcode test targets (``Tests/``, ``AppTests/``)."""


def is_test_dir(name: str) -> bool:
    """Whether a folder of this name holds tests or their data wherever it sits (:data:`TEST_DIRS`, or a Kotlin/Android
    test source set, a .NET test project, a Swift test target): the one folder rule of :func:`is_test_path` and
    mining's ``targets.is_test``.

    >>> is_test_dir("testdata"), is_test_dir("androidTest"), is_test_dir("Test"), is_test_dir("contest")
    (True, True, False, False)
    >>> is_test_dir("Shop.Api.Tests"), is_test_dir("Shop.UnitTests"), is_test_dir("AppTests"), is_test_dir("Contests")
    (True, True, True, False)
    """
    return name in TEST_DIRS or bool(_SOURCE_SET_TEST.match(name))


_CLASS_TEST_SUFFIXES = (".java", ".kt", ".scala", ".cs", ".php", ".swift")
"""Languages whose test files are classes named ``FooTest``/``FooTests`` (JUnit, NUnit/xUnit, PHPUnit, XCTest)."""


def is_test_path(path: str) -> bool:
    """Test files by the conventions of pytest, unittest, Django, Go, JS (Jest, tsd, Cypress), Ruby, Rust, Java,
    Kotlin, C# (NUnit/xUnit), C++ (``*_unittest.cc``), PHP, Swift and Perl (``*.t``).

    >>> [is_test_path(p) for p in ("pkg/tests/x.py", "test_a.py", "a_test.go", "pkg/core.py", "conftest.py")]
    [True, True, True, False, True]
    >>> [is_test_path(p) for p in ("src/app.spec.ts", "src/TestFoo.java", "pkg/testing/util.py", "pkg/contest.py")]
    [True, True, True, False]
    >>> [is_test_path(p) for p in ("src/__tests__/cart.js", "lib/cart_spec.rb", "spec/models/user.rb", "shop/tests.py")]
    [True, True, True, True]
    >>> [is_test_path(p) for p in ("src/CartTest.java", "Shop/CartTests.cs", "src/Latest.java", "pkg/_spec.py")]
    [True, True, False, False]
    >>> [is_test_path(p) for p in ("pkg/commands/test.py", "tools/generate_tests.py")]  # a CLI's `test` command
    [False, False]
    >>> [is_test_path(p) for p in ("index.test-d.ts", "src/tests.rs", "base/file_unittest.cc", "e2e/cart.cy.ts")]
    [True, True, True, True]
    >>> [is_test_path(p) for p in ("lib/src/commonTest/kotlin/A.kt", "cmd/testdata/in.golden", "src/integrationTest/a.kt")]
    [True, True, True]
    >>> [is_test_path(p) for p in ("src/Test/a.kt", "src/contest/a.kt", "pkg/fancy.py")]
    [False, False, False]
    >>> [is_test_path(p) for p in ("t/basic.t", "xt/author/pod.t", "t/lib/Helper.pm", "benches/parse.rs")]
    [True, True, True, False]
    """
    parts = path.split("/")
    name = parts[-1]
    stem = name.rsplit(".", 1)[0]
    return (any(map(is_test_dir, parts[:-1])) or stem.startswith("test_")
            or stem.endswith(("_test", "_unittest", ".test", ".spec", ".test-d", ".cy")) or name.endswith(".t")
            or name in ("conftest.py", "tests.py", "tests.rs")
            or (stem.endswith("_spec") and not name.endswith(".py"))
            or (stem.startswith("Test") and name.endswith(".java"))
            or (name.endswith(_CLASS_TEST_SUFFIXES) and stem.endswith(("Test", "Tests"))))

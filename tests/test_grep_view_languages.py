"""The agent's observations of a repository in another language than Python: the grep ``files`` view's definition
marks, the files a turn listed (what a copy-constrained submit may name) and the issue's file names."""
from __future__ import annotations

from pathlib import Path

import pytest

from codegrep.agent.protocol import shape_result
from codegrep.env.tools import RepoToolEnvironment, ToolCall
from conftest import commit_all

# name -> (defining file and its text, calling file); each caller uses the name three times, so on hit counts alone
# it would come first.
DEFINITIONS = {
    "ValidateSessionToken": ("auth/token.go", "package auth\n\nfunc (s *Store) ValidateSessionToken(t string) error {\n"
                             "\treturn nil\n}\n", "api/handlers.go"),
    "computeCartTotal": ("web/cart.ts", "export function computeCartTotal(items: Item[]): number {\n  return 0;\n}\n",
                         "web/checkout.tsx"),
    "parse_manifest": ("core/manifest.rs", "pub fn parse_manifest(text: &str) -> Manifest {\n    todo!()\n}\n",
                       "cli/main.rs"),
    "CartService": ("src/CartService.java", "public final class CartService {\n}\n", "src/App.java"),
}


@pytest.fixture()
def polyglot(tmp_path: Path):
    files = {"scripts/release.py": "print('release')\n"}  # a Python file the greps do not find
    for name, (defining, text, calling) in DEFINITIONS.items():
        files[defining] = text
        files[calling] = "".join(f"const r{i} = {name}(x{i});\n" for i in range(3))
    files["pyapp/core.py"] = "def main(value):\n    return value + input_value\n" + "x = input_value\n" * 4
    files["pyapp/io.py"] = "y = input_value\n"
    files["pyapp/static/jquery.js"] = "var input_value = 1;\n" * 3  # vendored code in a Python package
    files["pyapp/static/jquery.ui.js"] = "var input_value = 2;\n"  # more of it: most of the grep's files are JS
    files["pyapp/static/jquery.min.js"] = "var input_value=3;\n"
    commit_all(tmp_path / "repo", files)
    with RepoToolEnvironment(tmp_path / "repo") as env:
        yield env


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_files_view_marks_a_go_ts_rust_or_java_definition_and_lists_it_first(polyglot, name):
    """The view marked ``, def`` on Python ``def``/``class`` lines only: in a Go, TypeScript, Rust or Java repository
    the file that defines the name got no mark and came after the file that calls it three times."""
    call = ToolCall("grep", {"pattern": rf"\b{name}\b"})
    rows = shape_result(call, polyglot.call(call), "files").output.splitlines()
    defining, _, calling = DEFINITIONS[name]
    assert rows[0] == f"{defining} (1 hit, def)", rows
    assert rows[1:] == [f"{calling} (3 hits)"], rows


def test_files_view_keeps_pythons_rule_where_a_python_file_is_found(polyglot):
    """A Python package's vendored JavaScript (``var input_value`` in a jQuery copy) gets no mark and does not head
    the view: the grep finds Python files, so only Python's ``def``/``class`` counts."""
    call = ToolCall("grep", {"pattern": "input_value"})
    rows = shape_result(call, polyglot.call(call), "files").output.splitlines()
    assert rows == ["pyapp/core.py (5 hits)", "pyapp/static/jquery.js (3 hits)", "pyapp/io.py (1 hit)",
                    "pyapp/static/jquery.min.js (1 hit)", "pyapp/static/jquery.ui.js (1 hit)"]

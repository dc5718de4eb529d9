"""Find, remove and restore docstrings in Python source, line-exactly (for the default task set)."""
from __future__ import annotations

import ast
import difflib
import inspect
import re
from dataclasses import dataclass

_LINES = re.compile(r"[^\n]*\n|[^\n]+$")


@dataclass(frozen=True)
class Docstring:
    """A function's or class's docstring that occupies whole source lines."""

    path: str
    """Repository-relative file path."""
    qualname: str
    """Dotted name inside the module (``Class.method``)."""
    kind: str
    """``function`` or ``class``."""
    lineno: int
    """First line of the docstring (1-based)."""
    end_lineno: int
    """Last line of the docstring (inclusive)."""
    only_statement: bool
    """The docstring is the whole body, so removing it needs a ``pass``."""
    indent: str
    """Indentation of the docstring line."""
    paragraph: str
    """First paragraph, whitespace-normalised: the issue text."""
    first_line: str
    """The docstring's first non-empty source line, stripped (used to check it is gone)."""

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` ends (only ``\\n`` splits, unlike ``str.splitlines``).

    >>> split_lines("a\\n\\x0cb\\nc")
    ['a\\n', '\\x0cb\\n', 'c']
    """
    return _LINES.findall(text)


def first_paragraph(doc: str) -> str:
    """The first paragraph of a docstring, on one line.

    >>> first_paragraph("Do a thing\\n    to b.\\n\\n    More.")
    'Do a thing to b.'
    """
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


_CODE_NAME = re.compile(
    r"``?[^`]+``?"                          # ``literal`` / `name`
    r"|:\w+:`[^`]+`"                        # :class:`Repo` (Sphinx roles)
    r"|\b\w+\(\)"                           # call()
    r"|\b[A-Za-z_]\w+(?:\.\w+)+\b"          # dotted.name (not e.g.)
    r"|\b\w*_\w*\b"                          # snake_case / _private
    r"|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b")  # camelCase / CamelCase
MASK = "`...`"


def mask_code_names(text: str) -> str:
    """Replace identifiers (anything that looks like code) with a placeholder, keeping the prose.

    >>> mask_code_names("Return the ``foo_bar`` of :class:`Repo` via get_it() and os.path, in CamelCase.")
    'Return the `...` of `...` via `...` and `...`, in `...`.'
    """
    return _CODE_NAME.sub(MASK, text)


def plain_words(text: str) -> int:
    """Words that are not masked identifiers.

    >>> plain_words("Return the `...` of it.")
    4
    """
    return sum(1 for w in text.split() if MASK not in w)


def _walk(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qual = f"{prefix}{node.name}"
            yield qual, node
            yield from _walk(node, qual + ".")


def find_docstrings(path: str, text: str) -> list[Docstring]:
    """Docstrings of every function and class in ``text`` that sit on lines of their own.

    >>> src = 'def f():\\n    \"\"\"Add one.\\n\\n    Details.\"\"\"\\n    return 1\\n'
    >>> d = find_docstrings("m.py", src)[0]
    >>> d.qualname, d.lineno, d.end_lineno, d.paragraph, d.only_statement
    ('f', 2, 4, 'Add one.', False)
    """
    if "\r" in text:  # ast and our line split would disagree on line numbers
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = split_lines(text)
    out = []
    for qual, node in _walk(tree):
        first = node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            continue
        start, end = first.lineno, first.end_lineno or first.lineno
        head = lines[start - 1].encode()[: first.col_offset]
        tail = lines[end - 1].encode()[first.end_col_offset:]
        if head.strip() or tail.strip() or (len(node.body) == 1 and start == node.lineno):
            continue  # shares its lines with other code: cannot be removed line-exactly
        src_lines = [ln.strip() for ln in lines[start - 1:end]]
        first_line = next((s for s in (ln.strip("\"'rbuRBU ") for ln in src_lines) if len(s) > 3), "")
        out.append(Docstring(path, qual, "class" if isinstance(node, ast.ClassDef) else "function", start, end,
                             len(node.body) == 1, head.decode(), first_paragraph(first.value.value), first_line))
    return out


def strip_docstrings(text: str, docs: list[Docstring]) -> str:
    """Remove the given docstrings (a lone docstring becomes ``pass``) and return the new source.

    >>> src = 'def f():\\n    \"\"\"Add one.\"\"\"\\n    return 1\\n\\ndef g():\\n    \"\"\"Nothing.\"\"\"\\n'
    >>> print(strip_docstrings(src, find_docstrings("m.py", src)), end="")
    def f():
        return 1
    <BLANKLINE>
    def g():
        pass
    """
    if not docs:
        return text
    lines = split_lines(text)
    for d in sorted(docs, key=lambda d: d.lineno, reverse=True):
        end_nl = "\n" if lines[d.end_lineno - 1].endswith("\n") else ""
        lines[d.lineno - 1:d.end_lineno] = [f"{d.indent}pass{end_nl}"] if d.only_statement else []
    return "".join(lines)


def restore_diff(path: str, before: str, after: str) -> str:
    """A ``git diff``-style unified diff turning ``before`` into ``after`` for one file.

    >>> print(restore_diff("m.py", "a\\n", "a\\nb\\n"), end="")
    diff --git a/m.py b/m.py
    --- a/m.py
    +++ b/m.py
    @@ -1 +1,2 @@
     a
    +b
    """
    body = difflib.unified_diff(split_lines(before), split_lines(after), f"a/{path}", f"b/{path}", n=3)
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body)
    return f"diff --git a/{path} b/{path}\n{text}"

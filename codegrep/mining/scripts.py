"""The files a script or a patch file writes when an agent runs it (``python fix.py``, ``python - <<EOF``,
``python -c``, ``git apply x.patch``, ``patch -p1 < x.diff``): read from the text the run itself wrote
(a heredoc, an editor's ``create``), never guessed. Only literal paths count: a path the script computes
(``sys.argv[1]``, an f-string) names no file.
"""
from __future__ import annotations

import ast
import re
import warnings
from functools import lru_cache

from codegrep.data.patches import patch_changes

_PATH_FUNCS = {"Path", "PurePath", "PosixPath"}
_WRITE_MODE = re.compile(r"""(['"])[rbt]*[wax+][rwaxbt+]*\1""")  # a literal open() mode that writes
_MINUS = re.compile(r"^--- (\S[^\t\n]*)[^\n]*\n\+\+\+ (\S[^\t\n]*)", re.M)  # a unified diff's file header


@lru_cache(maxsize=256)
def python_writes(code: str, stopped_at: int | None = None) -> tuple[tuple[str, bool], ...]:
    """(path, modified) of every literal path the code opens for writing, in source order; ``modified``: the
    code also reads that path, or appends to or updates it (an edit of a file that was there), rather than
    only writing it (a new file). Code that does not parse writes nothing (Python would not run it).

    ``stopped_at``: the line at which the program, run as a script, stopped on an uncaught exception (its
    module-level frame; 0: it never ran, a syntax error). A write in a top-level statement after the one that
    stopped was not reached; a write in that statement, or in a function defined before it, may have run.

    >>> code = "s = open('pkg/a.py').read()\\nassert 'x' in s\\nopen('pkg/a.py', 'w').write(s)\\n"
    >>> python_writes(code), python_writes(code, 2), python_writes(code, 3), python_writes(code, 0)
    ((('pkg/a.py', True),), (), (('pkg/a.py', True),), ())
    >>> python_writes("def fix():\\n    open('b.py', 'w')\\nfix()\\nraise SystemExit(1)\\n", 4)
    (('b.py', False),)

    >>> python_writes("p = 'pkg/a.py'\\nwith open(p) as f:\\n    s = f.read()\\nwith open(p, 'w') as f:\\n    f.write(s)")
    (('pkg/a.py', True),)
    >>> python_writes("open('out.txt', 'w').write('x'); open('log.txt', mode='a')")
    (('out.txt', False), ('log.txt', True))
    >>> python_writes("from pathlib import Path\\nf = Path('pkg/b.py')\\nf.write_text(f.read_text().replace('a', 'b'))")
    (('pkg/b.py', True),)
    >>> python_writes("import sys\\nopen(sys.argv[1], 'w')"), python_writes("open('a.py', 'w'"), python_writes("open('a.py')")
    ((), (), ())
    """
    if stopped_at == 0 or "write_text" not in code and "write_bytes" not in code and not (
            "open" in code and _WRITE_MODE.search(code)):
        return ()  # a write this reads is write_text/write_bytes or an open() with a literal mode ('w', "a+", 'wb' ...);
        # the mode alone is no sign: Symbol('x') and 'a' are in most reproduction scripts
    try:
        with warnings.catch_warnings():  # an agent's invalid escape ('\\d') is its script's business
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python, or beyond the parser's limits
        return ()
    names: dict[str, list[str]] = {}
    calls = []
    for node in ast.walk(tree):  # one walk: names bound to literals (in walk order, as before), the calls
        if isinstance(node, ast.Call):
            calls.append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, []).extend(_literals(node.value, names))
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.List, ast.Tuple)):
            names.setdefault(node.target.id, []).extend(s for e in node.iter.elts for s in _literals(e, names))
    writes: list[tuple[int, int, str, bool]] = []
    reads: set[str] = set()
    for node in calls:
        target, mode = _opened(node)
        if target is None:
            continue
        paths = _literals(target, names)
        if mode is None:
            reads.update(paths)
        else:
            writes += [(node.lineno, node.col_offset, p, any(c in mode for c in "a+")) for p in paths]
    if stopped_at is not None:
        stop = next((st for st in tree.body if st.lineno <= stopped_at <= (st.end_lineno or st.lineno)), None)
        if stop is not None:  # a line of no top-level statement (the script changed since): nothing known
            writes = [w for w in writes if w[0] <= (stop.end_lineno or stop.lineno)]
    out: dict[str, bool] = {}
    for _, _, path, updated in sorted(writes):
        out[path] = out.get(path, False) or updated or path in reads
    return tuple(out.items())


def _literals(expr: ast.AST, names: dict[str, list[str]]) -> list[str]:
    """The path strings an expression can be: a literal, a name bound to literals, ``Path(literal)``,
    ``os.path.join(literals)``."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value] if expr.value and "\n" not in expr.value and len(expr.value) < 300 else []
    if isinstance(expr, ast.Name):
        return list(dict.fromkeys(names.get(expr.id, [])))
    if isinstance(expr, ast.Call):
        func = _func_name(expr.func)
        if func in _PATH_FUNCS and len(expr.args) == 1:
            return _literals(expr.args[0], names)
        if func == "join" and expr.args:
            parts = [_literals(a, names) for a in expr.args]
            if all(len(p) == 1 for p in parts):
                return ["/".join(p[0].rstrip("/") for p in parts)]
    return []


def _func_name(func: ast.AST) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _opened(call: ast.Call) -> tuple[ast.AST | None, str | None]:
    """(the path expression, the write mode or None for a read) of a call that opens a file; (None, None) else."""
    name = _func_name(call.func)
    owner = call.func.value if isinstance(call.func, ast.Attribute) else None
    if name in ("write_text", "write_bytes", "read_text", "read_bytes") and owner is not None:
        return owner, ("w" if name.startswith("write") else None)
    if name != "open":
        return None, None
    if owner is not None and not (isinstance(owner, ast.Name) and owner.id in ("io", "codecs", "builtins")):
        target, args = owner, call.args  # Path(...).open(mode)
    else:
        target, args = (call.args[0] if call.args else None), call.args[1:]
    mode = args[0] if args else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return target, None
    if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
        return None, None  # a mode the code computes (or os.open's flags): not known
    return target, mode.value if any(c in mode.value for c in "wax+") else None


def diff_targets(text: str, strip: int | None) -> list[str]:
    """The files a patch modifies, as ``git apply``/``patch -pN`` name them: a git diff's paths (``a/``/``b/``
    prefixes are git's), else a unified diff's ``+++`` paths (``---`` for a deletion) with ``strip`` leading
    components removed; None: the strip is not known (``patch`` without ``-p`` asks): nothing.

    >>> diff_targets("diff --git a/pkg/a.py b/pkg/a.py\\n--- a/pkg/a.py\\n+++ b/pkg/a.py\\n@@ -1 +1 @@\\n", 1)
    ['pkg/a.py']
    >>> diff_targets("--- pkg/a.py\\t2024-01-01\\n+++ pkg/a.py\\t2024-01-02\\n@@ -1 +1 @@\\n-a\\n+b\\n", 0)
    ['pkg/a.py']
    >>> diff_targets("--- a/x/b.py\\n+++ b/x/b.py\\n", 1), diff_targets("--- a/x/b.py\\n+++ b/x/b.py\\n", None)
    (['x/b.py'], [])
    """
    if "diff --git " in text:
        return list(dict.fromkeys(c.new or c.old for c in patch_changes(text) if c.new or c.old))
    if strip is None:
        return []
    out = []
    for old, new in _MINUS.findall(text):
        path = old if new.strip() == "/dev/null" else new
        parts = path.strip().split("/")
        if len(parts) > strip:
            out.append("/".join(parts[strip:]))
    return list(dict.fromkeys(out))

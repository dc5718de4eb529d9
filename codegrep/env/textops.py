"""Pure text helpers shared by both environment modes: glob matching, capping, numbered lines."""
from __future__ import annotations

import os

import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def glob_to_regex(pattern: str) -> re.Pattern:
    """Compile a repository glob. ``*``/``?`` stay inside one path segment, ``**`` crosses them,
    ``{a,b}`` alternates, ``[..]`` is a class; a pattern without ``/`` matches the file name anywhere.

    >>> bool(glob_to_regex("*.py").match("pkg/sub/mod.py")), bool(glob_to_regex("pkg/*.py").match("pkg/sub/m.py"))
    (True, False)
    >>> bool(glob_to_regex("pkg/**/*.py").match("pkg/m.py")), bool(glob_to_regex("**/test_*.{py,txt}").match("a/test_x.txt"))
    (True, True)
    >>> bool(glob_to_regex("[!a]*.c").match("b.c")), bool(glob_to_regex("src/").match("src/x/y.py"))
    (True, True)
    """
    pat = pattern.lstrip("/")
    if pat.endswith("/"):
        pat += "**"  # a directory pattern means everything below it
    if "/" not in pat:
        pat = "**/" + pat
    out, i, depth = [], 0, 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            if not out or out[-1] != "(?:.*/)?":  # `**/**/` is `**/`: repeats would backtrack polynomially
                out.append("(?:.*/)?")
            i += 3
            continue
        if pat.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in pat[i + 2:]:
            j = pat.index("]", i + 2)
            body = pat[i + 1:j]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j
        elif c == "{":
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    out.append(")" * depth)
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def cap_lines(lines: list[str], max_lines: int, max_bytes: int, total: int | None = None,
              more: bool = False, what: str = "lines", hint: str = "") -> tuple[str, bool]:
    """Join ``lines`` keeping at most ``max_lines`` and ``max_bytes``; say how much was cut.

    ``total`` is the full count when known, ``more`` that even the count is a lower bound.

    >>> cap_lines(["a", "b", "c"], 2, 100)
    ('a\\nb\\n[... truncated: showing 2 of 3 lines]', True)
    >>> cap_lines(["a", "b"], 5, 100)
    ('a\\nb', False)
    """
    total = len(lines) if total is None else total
    kept = fit_bytes(lines[:max_lines], max_bytes)
    if len(kept) == total and not more:
        return "\n".join(kept), False
    count = f"more than {total}" if more else str(total)
    note = f"[... truncated: showing {len(kept)} of {count} {what}{'; ' + hint if hint else ''}]"
    return "\n".join(kept + [note]), True


SKIPPED_PREFIX = "[not searched (over "
CHANGED_PREFIX = "[not shown (changed during the search"
NOTE_PREFIXES = (SKIPPED_PREFIX, CHANGED_PREFIX)
"""The lines a grep adds about files it was asked to search but shows no hits of (the files view keeps them)."""


def names_note(head: str, names: list[str], max_chars: int = 400) -> str:
    """One ``[head: a, b, c and N more]`` line naming the files a note is about.

    >>> names_note("[not searched (over 10 bytes)", ["a", "b", "c", "d", "e"])
    '[not searched (over 10 bytes): a, b, c and 2 more]'
    """
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return clip_line(f"{head}: {shown}]", max_chars)


def skipped_note(names: list[str], max_bytes: int, max_chars: int = 400) -> str:
    """The line a grep adds when files it was asked to search are over ``max_file_bytes`` (it would otherwise say
    "No matches found." of a file it never read).

    >>> skipped_note(["data/big.json"], 8_000_000)
    '[not searched (over 8000000 bytes): data/big.json]'
    """
    return names_note(f"{SKIPPED_PREFIX}{max_bytes} bytes)", names, max_chars)


def changed_note(names: list[str], max_chars: int = 400) -> str:
    """The line a grep adds when the hits ripgrep printed for a file are not lines of the regular file now at its
    path inside the repository (a live checkout changed: the file edited, or replaced by a symlink that ripgrep
    followed out of the repository); its hits are left out.

    >>> changed_note(["a.py"])
    '[not shown (changed during the search: edited, or a symlink now on its path): a.py]'
    """
    return names_note(f"{CHANGED_PREFIX}: edited, or a symlink now on its path)", names, max_chars)


def fit_bytes(lines: list[str], max_bytes: int) -> list[str]:
    """The longest prefix of ``lines`` whose newline-joined UTF-8 size fits ``max_bytes``.

    >>> fit_bytes(["aaaa", "bb", "c"], 8)
    ['aaaa', 'bb']
    """
    kept, size = [], 0
    for line in lines:
        size += len(line.encode("utf-8", "replace")) + 1
        if size > max_bytes + 1:
            break
        kept.append(line)
    return kept


def is_binary(data: bytes) -> bool:
    """Binary means a NUL byte in the first 8 KB (git's and ripgrep's rule).

    >>> is_binary(b"text\\n"), is_binary(b"\\x7fELF\\x00\\x01")
    (False, True)
    """
    return b"\x00" in data[:8192]


RG_CLIPPED = b" [... omitted end of long line]"
"""What ripgrep's ``--max-columns-preview`` appends to a line it cut to a preview: the line's length is then unknown."""


def rg_text(data: bytes) -> bytes:
    r"""The bytes ripgrep searches in a file's ``data`` (its default ``--encoding=auto``): a UTF-8 byte-order mark
    dropped, a UTF-16 file (by its byte-order mark) as UTF-8.

    >>> rg_text(b"\xef\xbb\xbfx = 1\n"), rg_text(b"\xff\xfe" + "x\n".encode("utf-16-le")), rg_text(b"x")
    (b'x = 1\n', b'x\n', b'x')
    """
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace").encode("utf-8")
    return data


def clip_line(line: str, max_chars: int, cut: bool = False) -> str:
    """Cut one over-long line (minified code) so one line cannot eat the byte budget. ``cut``: ``line`` is already
    a preview of a longer line (ripgrep cut it, :data:`RG_CLIPPED`), whose length is unknown, so no count is given.

    >>> clip_line("x" * 10, 4), clip_line("xxxx", 4, cut=True)
    ('xxxx [... 6 more characters]', 'xxxx [... rest of a long line omitted]')
    """
    if cut:
        return f"{line[:max_chars]} [... rest of a long line omitted]"
    return line if len(line) <= max_chars else f"{line[:max_chars]} [... {len(line) - max_chars} more characters]"


def grep_row(path: str, sep: str, number: int | str, text: str, max_chars: int, cut: bool = False) -> str:
    """One grep output row, ``path:N:text`` (a context line ``path-N-text``), its *text* clipped to ``max_chars``
    as read clips a line: the path and line number never eat into the line, so a match the preview holds stays.

    >>> grep_row("a/b.py", ":", 3, "x" * 10, 4)
    'a/b.py:3:xxxx [... 6 more characters]'
    """
    return f"{path}{sep}{number}{sep}{clip_line(text, max_chars, cut)}"


def text_lines(data: bytes) -> list[str]:
    r"""A file's lines as grep numbers them: split at ``\n`` only (a ``\r`` before it dropped), so line N of a
    ``read`` is the line a grep hit called N. ``str.splitlines`` also splits at form feeds, vertical tabs,
    ``\x1c``-``\x1e``, ``\x85``, ``\u2028``/``\u2029`` and a lone ``\r``, which shifted every later line number.

    >>> text_lines(b"a = 1\x0c\nb = 2\r\nc\n")
    ['a = 1\x0c', 'b = 2', 'c']
    >>> text_lines(b"x"), text_lines(b"")
    (['x'], [])
    """
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def numbered(lines: list[str], start: int, max_chars: int) -> list[str]:
    """``cat -n`` style lines: right-aligned number, a tab, the text.

    >>> numbered(["import os", "x = 1"], 9, 100)
    ['     9\\timport os', '    10\\tx = 1']
    """
    return [f"{n:>6}\t{clip_line(text, max_chars)}" for n, text in enumerate(lines, start)]


_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}


def display_path(raw: bytes) -> str:
    """How a file name is shown to the model (and accepted back): itself when it is clean UTF-8 text,
    else an escaped form, so a newline cannot split one name into two and a non-UTF-8 byte stays readable.

    >>> print(display_path(b"src/mod.py"), display_path(b"a\\nb.py"), display_path(b"caf\\xe9.txt"))
    src/mod.py a\\nb.py caf\\xe9.txt
    """
    try:
        text = raw.decode("utf-8")
        if not any(ord(c) < 32 or c == "\x7f" for c in text):
            return text
    except UnicodeDecodeError:
        pass
    out = []
    for c in raw.decode("utf-8", "surrogateescape"):
        if 0xDC80 <= ord(c) <= 0xDCFF:  # an undecodable byte
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        else:
            out.append(_ESCAPES.get(c, f"\\x{ord(c):02x}" if ord(c) < 32 or c == "\x7f" else c))
    return "".join(out)


def raw_path(display: str) -> bytes:
    r"""The file-name bytes a :func:`display_path` form stands for (its inverse for escaped names).

    >>> raw_path("caf\\xe9.txt"), raw_path("a\\nb.py"), raw_path("src/mod.py")
    (b'caf\xe9.txt', b'a\nb.py', b'src/mod.py')
    """
    if "\\" not in display:
        return os.fsencode(display)
    unescape = {v: k for k, v in _ESCAPES.items()}
    out, i = bytearray(), 0
    while i < len(display):
        if display.startswith("\\x", i) and len(display) >= i + 4:
            try:
                out.append(int(display[i + 2:i + 4], 16))
                i += 4
                continue
            except ValueError:
                pass
        if display[i:i + 2] in unescape:
            out += unescape[display[i:i + 2]].encode()
            i += 2
            continue
        out += os.fsencode(display[i])
        i += 1
    return bytes(out)


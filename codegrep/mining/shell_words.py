"""Shell words: a bash command line split into pipelines of simple commands (``tokenize``, ``_split``), with
heredocs, quoting and redirections handled, and each command's options read apart from its positional words
(``_positionals``). What the words *do* to files is ``codegrep.mining.shell``'s.

>>> tokenize("grep -rn 'def foo' pkg/ | head -5")
['grep', '-rn', 'def foo', 'pkg/', '|', 'head', '-5']
"""
from __future__ import annotations

import re
from functools import lru_cache

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
HEREDOC = "\x00"  # a heredoc's stand-in stdin file: HEREDOC + its index among the command's bodies
_SEPARATORS = set(";&|\n()")
_SEPARATOR_CHARS = ";&|\n()"
_OP_START = frozenset("0123456789;|&()<>\n")  # the first characters a redirection or separator can have
_OPERATOR = re.compile(r"[0-9]*>>?&?|&&|\|\||\n+|<<<|[;|&()<]")
_TOKEN = re.compile(r"""[0-9]*>>?&?|&&|\|\||\n+|<<<|[;|&()<]|#[^\n]*|(?:[^\s;|&()<>'"\\]+|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+""", re.S)
_QUOTED = re.compile(r"""['"\\]""")
_PART = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^'"\\]+)""", re.S)
_DQ_ESCAPE = re.compile(r"""\\([\\"$`\n])""")
_REDIRECT = re.compile(r"^[0-9]*(>>?|&>>?|>&|<|<<<?|>\|)$")


class _Stage:
    """One simple command of a pipeline, its redirections split off."""

    __slots__ = ("words", "writes", "stdin")

    def __init__(self, words: list[str] | None = None):
        self.words: list[str] = [] if words is None else words
        self.writes: list[tuple[str, bool]] = []  # (path, append)
        self.stdin: str | None = None  # the file a '<' redirection reads (a heredoc: HEREDOC + index)


def strip_heredocs(command: str) -> str:
    """Drop heredoc bodies (their text is file content, not commands); keep the command lines.

    >>> strip_heredocs("cat <<'EOF' > a.py\\nx = 1\\nEOF\\nls")
    'cat  > a.py\\nls'
    """
    return _heredocs(command)[0]


def _heredocs(command: str, placeholder: bool = False) -> tuple[str, list[str]]:
    """(the command lines, the heredoc bodies in order). ``placeholder``: each ``<<EOF`` becomes a stdin
    redirection from ``HEREDOC`` + its index (``cat <<EOF > a.py`` reads body 0), so a stage knows its input.

    >>> _heredocs("python3 - <<'EOF' > log\\nprint(1)\\nEOF\\nls", placeholder=True)
    ('python3 - < \\x000 > log\\nls', ['print(1)'])
    """
    if "<<" not in command:
        return command, []
    out, bodies, pos, n = [], [], 0, len(command)
    while pos <= n:  # line by line; a body is skipped in one search for its terminator line
        end = command.find("\n", pos)
        end = n if end == -1 else end
        line = command[pos:end]
        markers = _HEREDOC.findall(line) if "<<" in line and "<<<" not in line else ()
        if markers:
            first = len(bodies)
            count = iter(range(first, first + len(markers)))
            line = _HEREDOC.sub((lambda _: f"< {HEREDOC}{next(count)}") if placeholder else "", line)
        out.append(line)
        pos = end + 1
        for _, marker in markers:
            found = _terminator(marker).search(command, pos)
            bodies.append(command[pos:found.start()].rstrip("\n") if found else command[pos:])
            pos = found.end() + 1 if found else n + 1
    return "\n".join(out), bodies


@lru_cache(maxsize=256)
def _terminator(marker: str) -> re.Pattern[str]:
    """A heredoc's closing line: the marker alone (``line.strip() == marker``)."""
    return re.compile(rf"^[^\S\n]*{re.escape(marker)}[^\S\n]*$", re.M)


def _unquote(word: str) -> str:
    """Shell quote removal: ``'a b'`` -> ``a b``, ``"x\\"y"`` -> ``x"y``, ``a\\ b`` -> ``a b``; a line
    continuation (backslash-newline, outside single quotes) is removed: ``ca\\<newline>t`` -> ``cat``."""
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    out = []
    for m in _PART.finditer(word):
        if m.lastindex == 1:
            out.append(m.group(1))
        elif m.lastindex == 2:
            out.append(_DQ_ESCAPE.sub(_dq_unescape, m.group(2)))
        elif m.lastindex == 3:
            out.append("" if m.group(3) == "\n" else m.group(3))
        else:
            out.append(m.group(4))
    return "".join(out)


def _dq_unescape(m: re.Match[str]) -> str:
    return "" if m.group(1) == "\n" else m.group(1)


def tokenize(command: str) -> list[str]:
    """Shell words (quotes removed, POSIX rules) and operator tokens; newlines are separators.

    A regex does what ``shlex.shlex(posix=True, punctuation_chars=...)`` does here, ~10x faster, and what shlex
    does not: a backslash-newline (line continuation) joins the lines; a ``#`` that begins a word begins a
    comment, to the end of the line; an unbalanced quote (cut command) drops that quote character.

    >>> tokenize("a 'b c'|d && e; f\\ng 2>&1")
    ['a', 'b c', '|', 'd', '&&', 'e', ';', 'f', '\\n', 'g', '2>&', '1']
    >>> tokenize(r'''grep -n "def \\"x" 'a b'\\ c a.py > /dev/null''')
    ['grep', '-n', 'def "x', 'a b c', 'a.py', '>', '/dev/null']
    >>> tokenize("sed -i 's/a/b/' a.py && \\\\\\n  ca\\\\\\nt b.py")  # line continuations
    ['sed', '-i', 's/a/b/', 'a.py', '&&', 'cat', 'b.py']
    >>> tokenize("# let's look\\ncat a.py # it's here\\ngrep -n '#' b#.py")  # comments
    ['\\n', 'cat', 'a.py', '\\n', 'grep', '-n', '#', 'b#.py']
    """
    return [tok if tok[0] in "0123456789;|&()<>\n" and _OPERATOR.fullmatch(tok) else _unquote(tok)
            for tok in _TOKEN.findall(command)
            if tok[0] != "#" and ("\\\n" not in tok or tok.replace("\\\n", ""))]


_SUBSHELL = {"(": _Stage(["("]), ")": _Stage([")"])}  # markers among the pipelines: a cd inside does not outlast it


def _split(tokens: list[str]) -> list[list[_Stage]]:
    """Tokens -> pipelines of stages, redirection targets attached to their stage."""
    pipelines: list[list[_Stage]] = []
    stage = _Stage()
    pipe = [stage]
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        if not tok or tok[0] not in _OP_START:  # a plain word (the common case)
            stage.words.append(tok)
            i += 1
            continue
        if (("<" in tok or ">" in tok) and _REDIRECT.match(tok)) or (
                tok.isdigit() and i + 1 < n and _REDIRECT.match(tokens[i + 1])):
            if tok.isdigit():
                i += 1
                continue
            target = tokens[i + 1] if i + 1 < n else ""
            if ">" in tok and not target.isdigit() and not set(target) <= _SEPARATORS:
                stage.writes.append((target, ">>" in tok))
            elif tok == "<" and target and not set(target) <= _SEPARATORS:
                stage.stdin = target
            elif tok == "<<<":
                stage.stdin = HEREDOC  # a here-string: text, not a file
            i += 2 if target and not set(target) <= _SEPARATORS else 1
            continue
        if not tok.strip(_SEPARATOR_CHARS):  # every character a separator
            if tok.strip("\n") == "|" or tok == "|&":
                stage = _Stage()
                pipe.append(stage)
            elif len(pipe) > 1 or stage.words or stage.writes or tok in _SUBSHELL:
                pipelines.append(pipe)
                if tok in _SUBSHELL:  # ( and ): where a subshell (or a $(...)) begins and ends
                    pipelines.append([_SUBSHELL[tok]])
                stage = _Stage()
                pipe = [stage]
        else:
            stage.words.append(tok)
        i += 1
    pipelines.append(pipe)
    out = []
    for p in pipelines:
        kept = [s for s in p if s.words or s.writes]
        if kept:
            out.append(kept)
    return out


def _positionals(args: list[str], valued: set[str], joined: frozenset[str] = frozenset()
                 ) -> tuple[list[str], dict[str, str]]:
    """Split arguments into positionals and ``{option: value}`` (``--opt=v`` and ``-o v`` forms). An option given
    twice keeps its last value, except one in ``joined``, whose values are kept all, one a line (``sed -e A -e B``
    runs the script ``A`` newline ``B``).

    >>> _positionals(["-n", "-e", "1,5p", "-e10,20p", "--expression=30p", "f"], {"-e"}, frozenset({"-e", "--expression"}))
    (['f'], {'-n': '', '-e': '1,5p\\n10,20p', '--expression': '30p'})
    """
    pos: list[str] = []
    opts: dict[str, str] = {}
    i = 0

    def put(k: str, v: str) -> None:
        opts[k] = opts[k] + "\n" + v if k in joined and k in opts else v

    while i < len(args):
        a = args[i]
        if a == "--":
            pos += args[i + 1:]
            break
        if a.startswith("--") and "=" in a:
            put(*a.split("=", 1))
        elif a.startswith("-") and len(a) > 1:
            if a in valued and i + 1 < len(args):
                put(a, args[i + 1])
                i += 1
            elif a[:2] in valued and len(a) > 2 and not a.startswith("--"):
                put(a[:2], a[2:])
            else:
                opts[a] = ""
        else:
            pos.append(a)
        i += 1
    return pos, opts

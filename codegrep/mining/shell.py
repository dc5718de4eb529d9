"""Bash command -> file events, with ``shlex`` (pipes, ``&&``/``;``, quoting, redirections, heredocs).

>>> [(e.kind, e.path, e.pattern, e.lines) for e in parse_shell("grep -rn 'def foo' pkg/ | head -5")]
[('search', 'pkg', 'def foo', None)]
>>> [(e.kind, e.path, e.lines) for e in parse_shell("nl -ba /testbed/pkg/a.py | sed -n '10,40p'")]
[('view', 'pkg/a.py', (10, 40))]
>>> [(e.kind, e.path) for e in parse_shell("cat <<'EOF' > repro.py\\nprint(1)\\nEOF\\npython repro.py")]
[('create', 'repro.py'), ('run', None)]
>>> [(e.kind, e.path) for e in parse_shell("cd /testbed && sed -i 's/a/b/' pkg/a.py && find . -name '*.py'")]
[('edit', 'pkg/a.py'), ('find', '')]
"""
from __future__ import annotations

import posixpath
import re
from functools import lru_cache

from codegrep.mining.events import Event, repo_path

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
_SEPARATORS = set(";&|\n()")
_SEPARATOR_CHARS = ";&|\n()"
_OP_START = frozenset("0123456789;|&()<>\n")  # the first characters a redirection or separator can have
_OPERATOR = re.compile(r"[0-9]*>>?&?|&&|\|\||\n+|[;|&()<]")
_TOKEN = re.compile(r"""[0-9]*>>?&?|&&|\|\||\n+|[;|&()<]|#[^\n]*|(?:[^\s;|&()<>'"\\]+|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+""", re.S)
_QUOTED = re.compile(r"""['"\\]""")
_PART = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^'"\\]+)""", re.S)
_DQ_ESCAPE = re.compile(r"""\\([\\"$`\n])""")
_REDIRECT = re.compile(r"^[0-9]*(>>?|&>>?|>&|<|<<<?|>\|)$")
_SED_RANGE = re.compile(r"^\s*(\d+)\s*(?:,\s*(\d+|\$))?\s*p")
_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat", "view", "awk", "sed", "batcat"}
_SEARCHERS = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}
_QUIET = {"cd", "echo", "printf", "export", "true", "false", "pwd", "which", "source", "clear", "sleep", "set",
          "unset", "alias", "type", "history", "exit", "wc", "sort", "uniq", "cut", "tr", "env"}
_WRAPPERS = {"sudo", "time", "timeout", "nohup", "command", "exec", "stdbuf"}
# Options that take a value, per program (so the value is not mistaken for a pattern or a path).
_VALUED = {
    "grep": {"-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--include", "--exclude", "--exclude-dir",
             "--color", "--colour", "--max-count", "--context", "--after-context", "--before-context"},
    "rg": {"-e", "-f", "-g", "--glob", "-t", "--type", "-T", "--type-not", "-m", "-A", "-B", "-C", "-M",
           "--max-count", "--context", "--iglob", "-j", "--threads"},
    "head": {"-n", "-c"}, "tail": {"-n", "-c"}, "nl": {"-b", "-w", "-s", "-v", "-i"},
    "sed": {"-e", "-f", "-l"}, "awk": {"-F", "-v", "-f"}, "timeout": {"-s", "-k", "--signal"},
    "xargs": {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--max-args",
              "--max-procs", "--max-lines", "--max-chars"},
}
_SED_IN_PLACE = re.compile(r"^-[nrEsuz]*i")  # -i, -i.bak, and -i in a flag cluster: -Ei, -ni


class _Stage:
    """One simple command of a pipeline, its redirections split off."""

    __slots__ = ("words", "writes")

    def __init__(self, words: list[str] | None = None):
        self.words: list[str] = [] if words is None else words
        self.writes: list[tuple[str, bool]] = []  # (path, append)


def strip_heredocs(command: str) -> str:
    """Drop heredoc bodies (their text is file content, not commands); keep the command lines.

    >>> strip_heredocs("cat <<'EOF' > a.py\\nx = 1\\nEOF\\nls")
    'cat  > a.py\\nls'
    """
    if "<<" not in command:
        return command
    out, pos, n = [], 0, len(command)
    while pos <= n:  # line by line; a body is skipped in one search for its terminator line
        end = command.find("\n", pos)
        end = n if end == -1 else end
        line = command[pos:end]
        markers = _HEREDOC.findall(line) if "<<" in line else ()
        out.append(_HEREDOC.sub("", line) if markers else line)
        pos = end + 1
        for _, marker in markers:
            found = _terminator(marker).search(command, pos)
            pos = found.end() + 1 if found else n + 1
    return "\n".join(out)


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
            i += 2 if target and not set(target) <= _SEPARATORS else 1
            continue
        if not tok.strip(_SEPARATOR_CHARS):  # every character a separator
            if tok.strip("\n") == "|" or tok == "|&":
                stage = _Stage()
                pipe.append(stage)
            elif len(pipe) > 1 or stage.words or stage.writes:
                pipelines.append(pipe)
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


def _positionals(args: list[str], valued: set[str]) -> tuple[list[str], dict[str, str]]:
    """Split arguments into positionals and ``{option: value}`` (``--opt=v`` and ``-o v`` forms)."""
    pos, opts, i = [], {}, 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos += args[i + 1:]
            break
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            opts[k] = v
        elif a.startswith("-") and len(a) > 1:
            if a in valued and i + 1 < len(args):
                opts[a] = args[i + 1]
                i += 1
            elif a[:2] in valued and len(a) > 2 and not a.startswith("--"):
                opts[a[:2]] = a[2:]
            else:
                opts[a] = ""
        else:
            pos.append(a)
        i += 1
    return pos, opts


# Directories that are never a repository checkout: where an agent whose repository root is not recorded has gone
# when it changes into one (the home directory is /~, see ``repo_path``).
_SYSTEM_DIRS = frozenset({"~", "tmp", "var", "usr", "etc", "proc", "sys", "dev", "bin", "sbin", "lib", "lib64"})


def _outside(path: str, root: str | None) -> bool:
    """An absolute ``repo_path`` result is outside the repository when the root is known (the format recorded
    it); when not, only a system directory or an installed package is known not to be the checkout.

    >>> _outside("/tmp/x", None), _outside("/myproj/src", None), _outside("/myproj/src", "/testbed")
    (True, False, True)
    >>> _outside("/opt/conda/lib/python3.9/site-packages/django", None)
    True
    """
    parts = path.split("/")
    return root is not None or parts[1] in _SYSTEM_DIRS or "site-packages" in parts or "dist-packages" in parts


class _Context:
    """Per-command state: repository root, working directory, step, root fallback. The working directory is
    repository-relative (``""`` = the root), or absolute when the agent went outside the repository (``cd /tmp``):
    a relative path then names a file outside it, unless ``..`` climbs back in."""

    def __init__(self, step: int, root: str | None, cwd: str, paths: dict | None = None):
        self.step, self.root, self.cwd = step, root, cwd
        self.piped = False  # the current stage reads another command's output
        self.scope: str | None = None  # what a searcher given no files searches, when not ``cwd`` (xargs)
        self.paths = {} if paths is None else paths  # (raw, cwd) -> path, shared by one run's commands

    def path(self, raw: str) -> str | None:
        key = (raw, self.cwd)
        if key in self.paths:
            return self.paths[key]
        p = repo_path(raw, self.root)
        if p is None or p.startswith("/") or not self.cwd or raw.startswith("/"):
            pass
        elif self.cwd.startswith("/"):  # outside the repository: the path is the directory's
            p = repo_path(posixpath.normpath(posixpath.join(self.cwd, raw)), self.root)
        else:
            p = repo_path(posixpath.join(self.cwd, p))
        if self.root and p is not None and (p == ".." or p.startswith("../")):  # climbed out of a known root
            p = repo_path(posixpath.normpath(posixpath.join(self.root, p)), self.root)
        self.paths[key] = p
        return p

    def event(self, kind: str, raw_path: str | None = None, **kw) -> Event:
        return Event(kind, self.step, self.path(raw_path) if raw_path is not None else None, **kw)


def _sed_lines(script: str) -> tuple[int, int] | None:
    """``'10,40p'`` -> (10, 40); ``'5p'`` -> (5, 5); ``'3,$p'`` -> (3, -1)."""
    m = _SED_RANGE.match(script)
    if not m:
        return None
    start = int(m.group(1))
    end = m.group(2)
    return start, (start if end is None else -1 if end == "$" else int(end))


def _reader(prog: str, args: list[str], ctx: _Context) -> list[Event]:
    pos, opts = _positionals(args, _VALUED.get(prog, set()))
    if prog == "sed":
        script = opts.get("-e") or (pos.pop(0) if pos else "")
        if any(_SED_IN_PLACE.match(k) or k == "--in-place" for k in opts):
            return [ctx.event("edit", p) for p in pos]
        return [ctx.event("view", p, lines=_sed_lines(script)) for p in pos]
    if prog == "awk":
        pos = pos[1:] if "-f" not in opts else pos
    if prog in ("less", "more"):
        pos = [p for p in pos if not p.startswith("+")]  # +N, +/pattern: where to start, not a file
    lines = None
    n = opts.get("-n") or next((k[1:] for k in opts if k[1:].isdigit()), None)
    if prog == "head" and n and n.isdigit():
        lines = (1, int(n))
    elif prog == "tail" and n and n[0] == "+" and n[1:].isdigit():  # tail -n +K: from line K to the end
        lines = (max(1, int(n[1:])), -1)
    return [ctx.event("view", p, lines=lines) for p in pos]


def _perl(args: list[str], ctx: _Context) -> list[Event]:
    """``perl -pi -e SCRIPT f`` (``-i`` in any flag cluster, ``-i.bak``) edits ``f``; without ``-i`` it reads it.

    >>> [(e.kind, e.path) for c in ("perl -pi -e 's/a/b/' x.py y.py", "perl -0777 -i.bak -pe 's/a/b/s' x.py",
    ...  "perl -ne 'print if 3..9' x.py", "perl fix.pl") for e in parse_shell(c)]
    [('edit', 'x.py'), ('edit', 'y.py'), ('edit', 'x.py'), ('view', 'x.py'), ('run', None)]
    """
    in_place, script, files, i = False, False, [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and not files:
            flags = a[1:].split(".", 1)[0]
            in_place = in_place or "i" in flags
            if flags[-1:] in ("e", "E"):
                script, i = True, i + 1  # the next word is the program text
        elif not script:
            script = True  # the first operand is the program file
        else:
            files.append(a)
        i += 1
    if not files:  # a program that reads no file: a run
        return [Event("run", ctx.step, command=" ".join(["perl", *args])[:200])]
    return [ctx.event("edit" if in_place else "view", f) for f in files]


def _search(prog: str, args: list[str], ctx: _Context) -> list[Event]:
    pos, opts = _positionals(args, _VALUED["rg" if prog in ("rg", "ag") else "grep"])
    pattern = opts.get("-e") or opts.get("--regexp")
    if pattern is None and pos:
        pattern = pos.pop(0)
    if ctx.piped and not pos:
        return []  # filtering another command's output, not searching the repository
    scope = ctx.cwd if ctx.scope is None else ctx.scope
    return [Event("search", ctx.step, ctx.path(s) if s else scope, pattern=pattern) for s in pos or [""]]


def _find(args: list[str], ctx: _Context) -> list[Event]:
    roots = []
    for a in args:
        if a.startswith("-") or a in ("(", "!"):
            break
        roots.append(a)
    pattern = None
    for key in ("-name", "-iname", "-path", "-ipath", "-regex"):
        if key in args and args.index(key) + 1 < len(args):
            pattern = args[args.index(key) + 1]
            break
    events = [Event("find", ctx.step, ctx.path(r) if r else ctx.cwd, pattern=pattern) for r in roots or [""]]
    if "-exec" in args:
        rest = args[args.index("-exec") + 1:]
        if rest and rest[0] in _SEARCHERS:
            events += _search(rest[0], [a for a in rest[1:] if a not in ("{}", ";", "+")], ctx)
    return events


def _xargs(args: list[str], ctx: _Context, upstream: list[Event]) -> list[Event]:
    """``... | xargs [options] CMD ARGS``: CMD runs on the names the pipeline produced. A search given no files of
    its own searches those names: the scope of the last find/search/list before it, else the working directory.
    Other commands name only their own files (``xargs cat``'s files are not known).

    >>> [(e.kind, e.path, e.pattern) for c in ("find pkg -name '*.py' | xargs grep -n 'class Foo'",
    ...  "grep -rl foo src | xargs -I{} grep -n bar {}", "cat list.txt | xargs -0 -n 1 grep -l foo lib/a.py")
    ...  for e in parse_shell(c) if e.kind == "search"]
    [('search', 'pkg', 'class Foo'), ('search', 'src', 'foo'), ('search', 'src', 'bar'), ('search', 'lib/a.py', 'foo')]
    """
    i, valued, replace = 0, _VALUED["xargs"], None
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in valued:
            replace = args[i + 1] if a == "-I" and i + 1 < len(args) else replace
            i += 1
        elif a.startswith("-i") or a.startswith("--replace"):
            replace = a.partition("=")[2] if "=" in a else a[2:] or "{}"
        elif a.startswith("-I"):
            replace = a[2:]
        i += 1
    words = [w for w in args[i:] if w != replace]
    if not words:
        return []
    ctx.scope = next((e.path for e in reversed(upstream) if e.kind in ("find", "search", "list")), None)
    try:
        return _stage_events(_Stage(words), ctx, first=True)
    finally:
        ctx.scope = None


def _stage_events(stage: _Stage, ctx: _Context, first: bool, upstream: list[Event] | None = None) -> list[Event]:
    words = list(stage.words)
    while words and ("=" in words[0] and not words[0].startswith("-") and words[0].split("=")[0].isidentifier()):
        words.pop(0)  # FOO=1 cmd
    while words and words[0] in _WRAPPERS:
        prog = words.pop(0)
        if prog == "timeout" and words:
            pos, _ = _positionals(words, _VALUED["timeout"])
            words = words[words.index(pos[0]) + 1:] if pos else []
    events = [ctx.event("edit" if append else "create", p) for p, append in stage.writes]
    if not words:
        return events
    prog, args = words[0].rpartition("/")[2], words[1:]
    ctx.piped = not first
    if prog == "cd":
        target = ctx.path(args[0]) if args and args[0] != "-" else "/~" if not args else None
        if target is not None and (not target.startswith("/") or _outside(target, ctx.root)):
            ctx.cwd = target
    elif prog == "xargs":
        events += _xargs(args, ctx, upstream or [])
    elif prog in _READERS:
        events += _reader(prog, args, ctx)
    elif prog in _SEARCHERS:
        events += _search(prog, args, ctx)
    elif prog == "git" and args[:1] == ["grep"]:
        events += _search("grep", args[1:], ctx)
    elif prog == "find":
        events += _find(args, ctx)
    elif prog == "perl":
        events += _perl(args, ctx)
    elif prog in ("ls", "tree"):
        pos, _ = _positionals(args, set())
        events += [Event("list", ctx.step, ctx.path(p) if p else ctx.cwd) for p in pos or [""]]
    elif prog in ("touch", "mkdir") or prog == "tee":
        events += [ctx.event("create", p) for p in _positionals(args, set())[0]] if prog != "mkdir" else []
    elif prog == "rm":
        events += [ctx.event("delete", p) for p in _positionals(args, set())[0]]
    elif prog in ("cp", "mv"):
        pos = _positionals(args, set())[0]
        events += ([ctx.event("delete", pos[0])] if prog == "mv" and len(pos) == 2 else [])
        events += [ctx.event("create", pos[-1])] if len(pos) >= 2 else []
    elif prog not in _QUIET:
        events.append(Event("run", ctx.step, command=" ".join(words)[:200]))
    return events


def _attach_range(events: list[Event], stage: _Stage, before: _Stage) -> None:
    """``nl -ba f | sed -n 'a,bp'`` / ``cat f | head -n N``: the range belongs to the view of ``f``; after a view
    from line K to the end (``tail -n +K f | head -n N``) it counts from line K. ``tail -n N f`` (the last N
    lines) ends where the file does, which is not known: no range.

    >>> [e.lines for c in ("tail -n +100 a.py | head -n 20", "sed -n '5,$p' a.py | sed -n '2,3p'", "tail -5 a.py | head -2")
    ...  for e in parse_shell(c)]
    [(100, 119), (6, 7), None]
    """
    prog, args = stage.words[0].rpartition("/")[2] if stage.words else "", stage.words[1:]
    views = [e for e in events if e.kind == "view" and (e.lines is None or e.lines[1] == -1)]
    if not views or prog not in ("sed", "head") or (before.words[:1] == ["tail"] and views[-1].lines is None):
        return
    pos, opts = _positionals(args, _VALUED[prog])
    if pos[1:] if prog == "sed" else pos:
        return  # the stage reads its own files
    if prog == "sed":
        lines = _sed_lines(opts.get("-e") or (pos[0] if pos else ""))
    else:
        n = opts.get("-n") or next((k[1:] for k in opts if k[1:].isdigit()), None)
        lines = (1, int(n)) if n and n.isdigit() else None
    if lines:
        start = views[-1].lines[0] if views[-1].lines else 1
        views[-1].lines = (start + lines[0] - 1, -1 if lines[1] == -1 else start + lines[1] - 1)


_PLAIN = frozenset(";&|\n()<>'\"\\#")  # a command free of these is whitespace-separated words, nothing else


def _pipelines(command: str) -> list[list[_Stage]]:
    """``_split(tokenize(strip_heredocs(command)))``; a command of plain words (a third of real ones:
    ``cat a.py``, ``python x.py``) skips the tokeniser: its words are ``command.split()``."""
    if _PLAIN.isdisjoint(command):
        words = command.split()
        return [[_Stage(words)]] if words else []
    return _split(tokenize(strip_heredocs(command)))


class ShellParser:
    """``parse_shell`` for the commands of ONE run (same root): a command seen before in the run (a rerun
    ``python reproduce.py``, a second ``cat a.py``) and a path seen before are not parsed again. Scoped to a
    run on purpose: nothing is shared between trajectories.

    ``persistent``: the agent's commands share one shell session (SWE-agent, OpenHands and the tool-calling
    agents), so a ``cd`` stays in effect for the next commands; ``cwd`` is the working directory the next
    command starts in (repository-relative), which a caller that knows it (SWE-agent's recorded state) may
    set. mini-swe-agent runs every command in a fresh shell at the root (not persistent).

    >>> p = ShellParser("/testbed")
    >>> [(e.kind, e.step, e.path) for e in p("cat /testbed/a.py", 0) + p("cat /testbed/a.py", 4)]
    [('view', 0, 'a.py'), ('view', 4, 'a.py')]
    >>> p = ShellParser("/testbed", persistent=True)
    >>> [(e.kind, e.path) for e in p("cd /testbed/pkg", 0) + p("cat a.py", 1) + p("cd .. && cat a.py", 2)]
    [('view', 'pkg/a.py'), ('view', 'a.py')]
    """

    def __init__(self, root: str | None = None, persistent: bool = False):
        self.root, self.persistent, self.cwd = root, persistent, ""
        self.commands: dict[tuple[str, str], tuple[list[tuple], str]] = {}
        self.paths: dict[tuple[str, str], str | None] = {}

    def __call__(self, command: str, step: int = 0, cwd: str | None = None) -> list[Event]:
        """Events of ``command`` run in ``cwd`` (default: the root, or where the session's last command left it)."""
        start = (self.cwd if self.persistent else "") if cwd is None else cwd
        key = (command, start)
        done = self.commands.get(key)
        if done is None:
            events, end = _parse_shell(command, step, self.root, start, self.paths)
            self.commands[key] = ([(e.kind, e.path, e.pattern, e.lines, e.command) for e in events], end)
        else:
            events = [Event(kind, step, path, pattern, lines, cmd) for kind, path, pattern, lines, cmd in done[0]]
            end = done[1]
        if self.persistent:
            self.cwd = end
        return events

    def path(self, raw: str) -> str | None:
        """A path the agent named, repository-relative from the session's working directory (``repo_path``)."""
        return _Context(0, self.root, self.cwd, self.paths).path(raw)


def parse_shell(command: str, step: int = 0, root: str | None = None, cwd: str = "") -> list[Event]:
    """Events of one bash command line (several commands, pipes and heredocs allowed)."""
    return _parse_shell(command, step, root, cwd)[0]


def _parse_shell(command: str, step: int, root: str | None, cwd: str,
                 paths: dict | None = None) -> tuple[list[Event], str]:
    """(events, the working directory the command line leaves its shell in)."""
    ctx = _Context(step, root, cwd, paths)
    events: list[Event] = []
    for pipeline in _pipelines(command):
        pipe_events: list[Event] = []
        for i, stage in enumerate(pipeline):
            if i and stage.words:
                _attach_range(pipe_events, stage, pipeline[i - 1])
            pipe_events += _stage_events(stage, ctx, i == 0, pipe_events)
        events += pipe_events
    return [e for e in events if e.kind in ("run", "search", "find", "list") or e.path is not None], ctx.cwd

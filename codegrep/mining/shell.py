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

from codegrep.mining.events import Event, glob_split, looks_like_file, repo_path
from codegrep.mining.shell_words import HEREDOC, _SUBSHELL, _heredocs, _positionals, _split, _Stage, tokenize

_SED_RANGE = re.compile(r"^\s*(\d+)\s*(?:,\s*(\d+|\$))?\s*p")
_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat", "view", "awk", "sed", "batcat"}
_SEARCHERS = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}
_QUIET = {"cd", "echo", "printf", "export", "true", "false", "pwd", "which", "source", "clear", "sleep", "set",
          "unset", "alias", "type", "history", "exit", "wc", "sort", "uniq", "cut", "tr", "env"}
_WRAPPERS = {"sudo", "time", "timeout", "nohup", "command", "exec", "stdbuf", "npx", "uvx"}
_KEYWORDS = {"if", "then", "elif", "else", "while", "until", "do", "!", "{"}
"""Reserved words that open a compound command or one of its parts: the command after them is an ordinary one
(``if grep -q x f; then sed -i ... f; fi``, ``for f in ...; do cat f; done``, ``{ cat a; cat b; } | head``)."""
_HEADERS = {"for", "select", "case", "fi", "done", "esac", "}"}
"""Words that begin a part of a compound command that runs nothing itself (a loop's word list, a closing word)."""
# Options that take a value, per program (so the value is not mistaken for a pattern or a path).
_VALUED = {
    "grep": {"-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--include", "--exclude", "--exclude-dir",
             "--color", "--colour", "--max-count", "--context", "--after-context", "--before-context"},
    "rg": {"-e", "-f", "-g", "--glob", "-t", "--type", "-T", "--type-not", "-m", "-A", "-B", "-C", "-M",
           "--max-count", "--context", "--iglob", "-j", "--threads"},
    "head": {"-n", "-c"}, "tail": {"-n", "-c"}, "nl": {"-b", "-w", "-s", "-v", "-i"},
    "sed": {"-e", "--expression", "-f", "--file", "-l"}, "awk": {"-F", "-v", "-f"}, "timeout": {"-s", "-k", "--signal"},
    "tree": {"-L", "-I", "-P", "-o", "--filelimit"}, "ls": {"-I", "--ignore", "-w", "--width", "-T"},
    "xargs": {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--max-args",
              "--max-procs", "--max-lines", "--max-chars"},
    "truncate": {"-s", "--size", "-r", "--reference"}, "dos2unix": {"-c", "--convmode", "-m", "--add-bom"},
    "black": {"-l", "--line-length", "-t", "--target-version", "--config", "--include", "--exclude",
              "--extend-exclude", "--force-exclude", "-W", "--workers"},
    "ruff": {"--config", "--line-length", "--target-version", "--select", "--ignore", "--extend-select",
             "--exclude", "--extend-exclude", "--stdin-filename"},
    "isort": {"-l", "--line-length", "-p", "--project", "--settings-path", "--sp", "--profile", "-m", "--multi-line"},
    "prettier": {"--config", "--parser", "--tab-width", "--print-width", "--ignore-path", "--plugin",
                 "--trailing-comma", "--end-of-line"},
    "yapf": {"--style", "-l", "--lines", "-e", "--exclude", "-p"}, "gofmt": {"-r"},
    "autopep8": {"--max-line-length", "--select", "--ignore", "-j", "--jobs", "--exclude"},
    "autoflake": {"--imports", "--exclude"}, "rustfmt": {"--edition", "--config", "--config-path", "--emit"},
    "eslint": {"-c", "--config", "--ext", "--rule", "--parser", "--ignore-path"},
}
_CONVERTERS = frozenset({"dos2unix", "unix2dos", "mac2unix", "unix2mac"})
"""Line-ending converters (in ``_IN_PLACE``; ``-n IN OUT``: write OUT from IN)."""
_IN_PLACE = {
    **{name: ((), ("-i", "--info")) for name in _CONVERTERS},
    "black": ((), ("--check", "--diff")), "ruff format": ((), ("--check", "--diff")),
    "ruff check": (("--fix", "--unsafe-fixes"), ("--diff",)),
    "isort": ((), ("--check-only", "--check", "-c", "--diff")),
    "autopep8": (("-i", "--in-place"), ("-d", "--diff")), "yapf": (("-i", "--in-place"), ("-d", "--diff")),
    "autoflake": (("-i", "--in-place"), ("-c", "--check", "--check-diff")), "gofmt": (("-w",), ()),
    "goimports": (("-w",), ()), "prettier": (("--write", "-w"), ("--check", "-c", "--list-different", "-l")),
    "clang-format": (("-i",), ()), "rustfmt": ((), ("--check",)), "eslint": (("--fix",), ("--fix-dry-run",)),
    "go fmt": ((), ("-n",)),
}
"""THE list of programs that rewrite the files they are given in place (besides ``sed -i``, ``perl``/``ruby -i`` and
``truncate``, whose scripts or sizes need their own reading): program (or ``program subcommand``) -> (the options one
of which makes it write, none: it always does; the options that make it only report). Their files are edits."""
_SED_SCRIPTS = frozenset({"-e", "--expression"})
"""sed's script options: each may be given several times, and the script is all of them, one a line."""
_SED_IN_PLACE = re.compile(r"^-[nrEsuz]*i")  # -i, -i.bak, and -i in a flag cluster: -Ei, -ni
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


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

    def __init__(self, step: int, root: str | None, cwd: str, paths: dict | None = None, files: dict | None = None):
        self.step, self.root, self.cwd = step, root, cwd
        self.files = {} if files is None else files  # path -> text the run wrote there, shared by its commands
        self.bodies: list[str] = []  # the command's heredoc bodies
        self.stateful = False  # the command used or changed ``files``
        self.depth = 0  # shells around this one (bash -c ..., bash script.sh)
        self.piped = False  # the current stage reads another command's output
        self.scope: str | None = None  # what a searcher given no files searches, when not ``cwd`` (xargs)
        self.output: str | None = None  # what the command printed, when the run recorded it
        self.exit_code: int | None = None  # the command line's exit status, when the run recorded it
        self.last = False  # the current stage is the command line's last: the exit status is its own
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

    def stdin(self, stage: _Stage) -> str | None:
        """The text a stage reads on its standard input, when known (a heredoc, a file the run wrote)."""
        if stage.stdin is None:
            return None
        if stage.stdin.startswith(HEREDOC):
            index = stage.stdin[1:]
            return self.bodies[int(index)] if index.isdigit() and int(index) < len(self.bodies) else None
        return self.text(stage.stdin)

    def text(self, raw: str) -> str | None:
        """The text the run wrote to ``raw``, when known."""
        self.stateful = True  # known or not, the answer depends on what the run wrote before
        return self.files.get(self.path(raw))

    def written(self, raw: str, text: str | None, append: bool = False) -> None:
        """Record what a write left in ``raw`` (None: not known)."""
        path = self.path(raw)
        if path is None or (text is None and path not in self.files):
            return
        self.stateful = True
        if text is None or (append and path not in self.files):
            self.files.pop(path, None)
        else:
            self.files[path] = self.files[path] + "\n" + text if append else text

    def event(self, kind: str, raw_path: str | None = None, **kw) -> Event:
        """The event of ``raw_path``; a view or a write the recorded output says failed (``unread``: ``cat x.py``,
        ``sed -i ... x.py``, ``> nodir/x.py`` answered "No such file or directory") names no file."""
        path = self.path(raw_path) if raw_path is not None else None
        if kind in _CHECKED and path is not None and self.output and unread(raw_path, self.output, kind):
            path = None  # dropped with the events that name no file
        return Event(kind, self.step, path, **kw)


_CHECKED = frozenset({"view", "edit", "create"})
"""The events a program's error line undoes: it read, or wrote, nothing of the file it names."""
_UNREAD = re.compile(r"No such file or directory|Is a directory|Not a directory|Permission denied|does not exist")
"""What a program prints when it could not read a file (the system's ENOENT, EISDIR, ENOTDIR, EACCES; ``git show``'s
``path 'x' does not exist``)."""


def unread(raw: str, output: str, kind: str = "view") -> bool:
    """The recorded output of a command says it could not read (or open for writing) ``raw``, the path as the
    command named it: a line of ``_UNREAD`` that names it (``cat: x.py: No such file or directory``, ``sed: can't
    read x.py: ...`` (also ``sed -i``'s), ``head: cannot open 'x.py' for reading: ...``, ``cat: pkg: Is a
    directory``, ``bash: nodir/x.py: No such file or directory`` of a redirection).

    >>> gone = "cat: pkg/x.py: No such file or directory"
    >>> unread("pkg/x.py", gone), unread("x.py", gone), unread("pkg/x.py", "pkg/x.py: 1 line")
    (True, False, False)
    >>> unread("a.py", "head: cannot open 'a.py' for reading: No such file or directory"), unread("a.py", "1 import os")
    (True, False)
    >>> unread("pkg/a.py", "     1\t# pkg/a.py: Permission denied errors are retried"), unread("x", "fatal: path 'x' does not exist in 'HEAD'")
    (False, True)

    A write (``kind`` ``edit``/``create``) is undone by its writer's line only: not by the diagnostics of the script
    it wrote, run after it (``run.sh: line 1: cd: nodir: No such file or directory``, argparse's ``repro.py: error:
    ...``), and a create not by a reader's line (``ls x.py; cat > x.py <<EOF``: x.py was missing, then made).

    >>> unread("run.sh", "run.sh: line 1: cd: nodir: No such file or directory", "create")
    False
    >>> [unread("x.py", out, "create") for out in ("ls: cannot access 'x.py': No such file or directory",
    ...                                             "bash: x.py: No such file or directory")]
    [False, True]
    """
    if not _UNREAD.search(output):
        return False
    name = re.compile(r"(?<![\w./-])" + re.escape(raw) + r"(?![\w/-]|\.\w)")
    own = raw + ":"  # a line the written script printed itself (a write's own diagnostics open with their program)
    return any(_UNREAD.search(line) and name.search(line) for line in output.splitlines()
               if raw in line and (m := _ERROR_LINE.match(line))
               and (kind == "view" or not line.startswith(own))
               and (kind != "create" or _WRITER.fullmatch(m.group()[:-2]) is not None))


_ERROR_LINE = re.compile(r"[\w.+/-]+: ")
"""How a program's error line opens (``cat: ``, ``sed: ``, ``fatal: ``): a shown file's own text (``cat -n``'s numbered
lines, ``head``'s ``==>`` headers, a comment that names a path) is not its reader's error."""
_WRITER = re.compile(r"(?:[\w.+-]*/)*(?:ba|da|z|k)?sh|tee|touch|truncate|cp|mv|install|dos2unix|unix2dos|\w*Error")
"""The programs whose error line says a create failed: the shell of a redirection (``bash: nodir/x.py: No such
file``), the programs that create files (``tee``, ``touch``, ``cp``) and Python's exceptions (a script's writes)."""


def _sed_lines(script: str) -> tuple[int, int] | None:
    """``'10,40p'`` -> (10, 40); ``'5p'`` -> (5, 5); ``'3,$p'`` -> (3, -1)."""
    m = _SED_RANGE.match(script)
    if not m:
        return None
    start = int(m.group(1))
    end = m.group(2)
    return start, (start if end is None else -1 if end == "$" else int(end))


def _sed_ranges(script: str) -> list[tuple[int, int] | None]:
    """The line ranges a ``sed -n`` script prints: one per ``A,Bp`` of a ``;``/newline list of them (each range is
    shown), else the one ``_sed_lines`` reads.

    >>> _sed_ranges("1,50p;250,270p"), _sed_ranges("10,20p"), _sed_ranges("/def/p")
    ([(1, 50), (250, 270)], [(10, 20)], [None])
    """
    parts = [p for p in re.split(r"[;\n]", script) if p.strip()]
    if len(parts) > 1 and all(_SED_RANGE.fullmatch(p.strip()) for p in parts):
        return [_sed_lines(p.strip()) for p in parts]
    return [_sed_lines(script)]


def _sed_script(opts: dict[str, str]) -> str:
    """The script sed's ``-e`` / ``--expression`` options give (every one of them, one a line), else ""."""
    return "\n".join(opts[k] for k in sorted(_SED_SCRIPTS) if opts.get(k))


def _reader(prog: str, args: list[str], ctx: _Context) -> list[Event]:
    pos, opts = _positionals(args, _VALUED.get(prog, set()), _SED_SCRIPTS if prog == "sed" else frozenset())
    if prog == "sed":
        if "-i" in opts and pos[:1] == [""]:
            pos.pop(0)  # BSD sed's -i '': an empty backup suffix, not the script
        from_file = opts.keys() & {"-f", "--file"}  # sed -i -f fix.sed f: the script is a file, every word a file
        script = _sed_script(opts) or ("" if from_file else pos.pop(0) if pos else "")
        if any(_SED_IN_PLACE.match(k) or k == "--in-place" for k in opts):
            return [ctx.event("edit", p) for p in pos]
        return [ctx.event("view", p, lines=lines) for p in pos for lines in _sed_ranges(script)]
    if prog == "awk":
        script = pos.pop(0) if "-f" not in opts and pos else ""
        return [ctx.event("view", p, lines=_awk_lines(script)) for p in pos]
    if prog in ("less", "more"):
        pos = [p for p in pos if not p.startswith("+")]  # +N, +/pattern: where to start, not a file
    lines = None
    n = opts.get("-n") or next((k[1:] for k in opts if k[1:].isdigit()), None)
    if prog == "head" and n and n.isdigit():
        lines = (1, int(n))
    elif prog == "tail" and n and n[0] == "+" and n[1:].isdigit():  # tail -n +K: from line K to the end
        lines = (max(1, int(n[1:])), -1)
    return [ctx.event("view", p, lines=lines) for p in pos]


_AWK_RANGE = re.compile(r"^\s*NR\s*(==|>=|>)\s*(\d+)\s*(?:(&&|,)\s*NR\s*(==|<=|<)\s*(\d+))?\s*(\{|$)")


def _awk_lines(script: str) -> tuple[int, int] | None:
    """The lines an awk program that selects by line number prints: ``NR>=a && NR<=b``, ``NR==a,NR==b``,
    ``NR==a``, ``NR>a`` (to the end), with or without an action.

    >>> [_awk_lines(s) for s in ("NR>=10 && NR<=20", "NR==5,NR==9 {print}", "NR==7", "NR>3 && NR<8", "NR>100",
    ...  "{print $1}", "NR%2==0")]
    [(10, 20), (5, 9), (7, 7), (4, 7), (101, -1), None, None]
    """
    m = _AWK_RANGE.match(script)
    if not m:
        return None
    op, a, join, op2, b = m.group(1), int(m.group(2)), m.group(3), m.group(4), m.group(5)
    start = a + 1 if op == ">" else a
    if join is None:
        return (start, start) if op == "==" else (start, -1)
    if (join == ",") != (op == "==" and op2 == "=="):
        return None  # NR==a && NR==b, NR>=a,NR<=b: not a plain range
    return start, int(b) - 1 if op2 == "<" else int(b)


_SCRIPTED = {"perl": ("eE", "IMmFdDx", "I"), "ruby": ("e", "rICEFxKTW", "rICE")}
"""Interpreters that run a one-line program over files (``-i``: in place): program -> (the letters whose value is the
next word, the program text; the letters whose value is the rest of their word; of those, the ones whose value is
the next word when the rest is empty: ``perl -I lib``, ``ruby -r json``). ``-0``/``-l`` take digits only
(``-0777``, ``-lne``); ``-i`` takes the rest of its word (the backup suffix: ``-i.bak``)."""


def _one_liner(prog: str, args: list[str], ctx: _Context) -> list[Event]:
    """``perl -pi -e SCRIPT f`` / ``ruby -i -pe SCRIPT f`` (``-i`` in any flag cluster, ``-i.bak``) edit ``f``;
    without ``-i`` they read it (``_SCRIPTED``: a value such as ``-MList::Util`` or ``-r json`` is not a flag).

    >>> [(e.kind, e.path) for c in ("perl -pi -e 's/a/b/' x.py y.py", "perl -0777 -i.bak -pe 's/a/b/s' x.py",
    ...  "perl -ne 'print if 3..9' x.py", "perl fix.pl") for e in parse_shell(c)]
    [('edit', 'x.py'), ('edit', 'y.py'), ('edit', 'x.py'), ('view', 'x.py'), ('run', None)]
    >>> [(e.kind, e.path) for c in ("perl -MList::Util=sum -lne 'print' x.py", "ruby -i -pe 'gsub(/a/, %q(b))' x.rb",
    ...  "ruby -r json -pi.orig -e 'x' y.rb", "ruby -ne 'print if /def/' z.rb") for e in parse_shell(c)]
    [('view', 'x.py'), ('edit', 'x.rb'), ('edit', 'y.rb'), ('view', 'z.rb')]
    >>> [(e.kind, e.path) for c in ("perl -I lib fix.pl", "perl -Ilib -ne 'print' x.pl") for e in parse_shell(c)]
    [('run', None), ('view', 'x.pl')]
    """
    scripts, rest, next_word = _SCRIPTED[prog]
    in_place, script, files, i = False, False, [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and a != "--" and not files:
            j = 1
            while j < len(a):
                letter = a[j]
                if letter == "i":
                    in_place = True
                    break  # the rest of the word is the backup suffix
                if letter in scripts:
                    script, i = True, i + 1  # the next word is the program text
                    break
                if letter in rest:
                    i += 1 if j + 1 == len(a) and letter in next_word else 0  # -r json: the next word is its value
                    break
                j += 1
                while letter in "0l" and j < len(a) and a[j].isdigit():
                    j += 1
        elif a == "--" and not files:
            pass
        elif not script:
            script = True  # the first operand is the program file
        else:
            files.append(a)
        i += 1
    if not files:  # a program that reads no file: a run
        return [Event("run", ctx.step, command=" ".join([prog, *args])[:200])]
    return [ctx.event("edit" if in_place else "view", f) for f in files]


def _rewrite(prog: str, args: list[str], ctx: _Context) -> list[Event]:
    """``truncate -s N f`` and the programs of ``_IN_PLACE`` (``dos2unix f``, ``black f``, ``gofmt -w f``) change
    their files in place: edits (``truncate -s 0 f`` empties f, as ``> f`` does: a create); ``dos2unix -n IN OUT``
    reads IN and writes OUT; without the option that makes it write (``gofmt f`` prints), or with one that makes it
    only report (``black --check f``, ``dos2unix -i f``), it writes nothing: a run. A formatter given a folder
    rewrites the files under it (``_formatted``).

    >>> [(e.kind, e.path) for c in ("truncate -s 0 log.txt", "truncate -s +1 pkg/a.py", "dos2unix pkg/a.py pkg/b.py")
    ...  for e in parse_shell(c)]
    [('create', 'log.txt'), ('edit', 'pkg/a.py'), ('edit', 'pkg/a.py'), ('edit', 'pkg/b.py')]
    >>> [(e.kind, e.path) for c in ("unix2dos -n pkg/a.py out.txt", "dos2unix -i pkg/a.py") for e in parse_shell(c)]
    [('view', 'pkg/a.py'), ('create', 'out.txt'), ('run', None)]
    >>> [(e.kind, e.path) for c in ("gofmt -w cmd/main.go", "gofmt -l cmd/main.go", "black -l 100 pkg/a.py",
    ...  "ruff format --check pkg/b.py", "ruff check --fix pkg/c.py", "npx prettier --write src/app.ts") for e in parse_shell(c)]
    [('edit', 'cmd/main.go'), ('run', None), ('edit', 'pkg/a.py'), ('run', None), ('edit', 'pkg/c.py'), ('edit', 'src/app.ts')]
    >>> [(e.kind, e.path) for c in ("go fmt ./...", "gofmt -w .", "prettier --write Makefile") for e in parse_shell(c)]
    [('edit', '*'), ('edit', '*'), ('edit', 'Makefile')]
    >>> [(e.kind, e.path) for c in ("ruff format", "black", "ruff check --fix") for e in parse_shell(c)]  # no file named
    [('run', None), ('run', None), ('run', None)]
    """
    key = prog if prog in _IN_PLACE or prog == "truncate" else f"{prog} {args[0]}"  # ruff format f
    args = args if key == prog else args[1:]
    pos, opts = _positionals(args, _VALUED.get("dos2unix" if prog in _CONVERTERS else prog, set()))
    writes, reports = _IN_PLACE.get(key, ((), ()))
    if prog == "truncate":
        size = opts.get("-s") or opts.get("--size") or ""
        kinds = [("create" if size.strip() == "0" else "edit", p) for p in pos]
    elif opts.keys() & set(reports) or (writes and not opts.keys() & set(writes)) or not pos:
        return [Event("run", ctx.step, command=" ".join([key, *args])[:200])]  # it only reports, or names no file
    elif prog in _CONVERTERS and opts.keys() & {"-n", "--newfile"}:
        kinds = [(kind, p) for pair in zip(pos[::2], pos[1::2]) for kind, p in zip(("view", "create"), pair)]
    else:
        kinds = [("edit", p if prog in _CONVERTERS else _formatted(p)) for p in pos]
    for kind, p in kinds:
        if kind != "view":
            ctx.written(p, None)  # what the run knew it held is gone
    return [ctx.event(kind, p) for kind, p in kinds]


def _formatted(raw: str) -> str:
    """What a formatter given ``raw`` rewrites: that file, or, given a folder (``black .``, ``gofmt -w pkg/``) or
    Go's package pattern (``go fmt ./...``, ``gofmt -w pkg/...``), the files under it, no one file: ``pkg/*``. A
    name is a folder unless ``looks_like_file`` (``prettier --write Makefile`` formats the file).

    >>> [_formatted(p) for p in ("a.py", ".", "pkg/", "./...", "pkg/...", "Makefile", "src")]
    ['a.py', './*', 'pkg/*', './*', 'pkg/*', 'Makefile', 'src/*']
    """
    folder = raw[:-3] if raw.endswith("...") else raw
    if folder is raw and looks_like_file(raw):
        return raw
    return f"{folder.rstrip('/') or '.'}/*"


def _search(prog: str, args: list[str], ctx: _Context) -> list[Event]:
    pos, opts = _positionals(args, _VALUED["rg" if prog in ("rg", "ag") else "grep"])
    if prog == "rg" and "--files" in opts:  # rg --files [-g GLOB] [dir]: lists files, searches none
        glob = opts.get("-g") or opts.get("--glob") or opts.get("--iglob")
        return [Event("find", ctx.step, ctx.path(p) if p else ctx.cwd, pattern=glob) for p in pos or [""]]
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


def _python(args: list[str], ctx: _Context, stdin: str | None) -> list[Event]:
    """The files a Python program writes (``scripts.python_writes``): its code from ``-c``, from a script the run
    wrote (``cat <<EOF > fix.py`` then ``python fix.py``), or from standard input (``python - <<EOF``). A write
    of a file the code also reads or appends to is an edit, else a create (as ``>>`` and ``>`` are). ``python -m M``
    runs the environment's code, not the run's: it writes nothing known, unless M is an in-place writer of
    ``_IN_PLACE`` (``python -m black f`` edits f).

    >>> [(e.kind, e.path) for e in parse_shell("cat <<'EOF' > fix.py\\np = 'pkg/a.py'\\ns = open(p).read()\\n"
    ...  "open(p, 'w').write(s.replace('a', 'b'))\\nEOF\\npython3 fix.py && python -c \\"open('out.txt', 'w')\\"")]
    [('create', 'fix.py'), ('run', None), ('edit', 'pkg/a.py'), ('run', None), ('create', 'out.txt')]
    """
    from codegrep.mining.scripts import python_writes

    code, i, program = stdin, 0, "<stdin>"
    while i < len(args):
        a = args[i]
        if a.startswith("-c"):
            code, program = a[2:] or (args[i + 1] if i + 1 < len(args) else None), "<string>"
            break
        if a.startswith("-m"):
            module = a[2:] or (args[i + 1] if i + 1 < len(args) else "")
            rest = args[i + (1 if a[2:] else 2):]
            if module not in _IN_PLACE and f"{module} {rest[0] if rest else ''}" not in _IN_PLACE:
                return []
            return [e for e in _rewrite(module, rest, ctx) if e.kind != "run"]  # (the caller's run is its run)
        if a != "-" and not a.startswith("-"):
            code, program = ctx.text(a), a
            break
        i += 2 if a in ("-W", "-X") else 1
    stop = _stopped_at(ctx, program) if code else None  # how far it ran, where its recorded output says
    writes = python_writes(code, stop) if code else ()  # one parse (the cache is keyed by both)
    if writes or stop is not None:  # what it wrote depends on its output: the same command with another output
        ctx.stateful = True  # is parsed again
    for path, _ in writes:
        ctx.written(path, None)
    return [ctx.event("edit" if modified else "create", path) for path, modified in writes]


_FRAME = re.compile(r'^[ \t]*File "([^"\n]+)", line (\d+)(?:, in (.+))?$', re.M)
_COMPILE_ERROR = re.compile(r"^(?:SyntaxError|IndentationError|TabError)\b", re.M)


def _stopped_at(ctx: _Context, program: str) -> int | None:
    """Where a Python program stopped, by the output the run recorded for its command (``scripts.python_writes``'s
    ``stopped_at``): the line of its last module-level frame (``File "fix.py", line 7, in <module>``) in a traceback,
    or 0 for a syntax error in the program itself (it never ran). ``program``: the script as the command named it, or
    ``<string>`` (``-c``) / ``<stdin>``, as tracebacks name them; a script is matched by its path too (Python 3.9+
    prints it absolute). None when the output shows no such stop, is not recorded, or the command's exit status is
    recorded, is this program's (it ran last) and is 0: the traceback was printed and the program went on.

    >>> ctx = _Context(0, "/testbed", "")
    >>> ctx.output = 'Traceback (most recent call last):\\n  File "/testbed/fix.py", line 3, in <module>\\nKeyError: 1'
    >>> _stopped_at(ctx, "fix.py"), _stopped_at(ctx, "other.py"), _stopped_at(ctx, "<string>")
    (3, None, None)
    >>> ctx.output = '  File "<string>", line 1\\n    x = (\\n        ^\\nSyntaxError: unexpected EOF while parsing'
    >>> _stopped_at(ctx, "<string>")
    0
    """
    from codegrep.mining.formats.base import exit_code_in

    text = ctx.output
    if not text or 'File "' not in text:
        return None
    code = ctx.exit_code if ctx.exit_code is not None else exit_code_in(text)  # read only when it matters
    if code == 0 and ctx.last and ctx.depth == 0:
        return None
    mine = ctx.path(program) if not program.startswith("<") else None
    stop = None
    for m in _FRAME.finditer(text):
        name = m.group(1)
        if name != program and (mine is None or ctx.path(name) != mine):
            continue
        if m.group(3) == "<module>":
            stop = int(m.group(2))
        elif m.group(3) is None and _COMPILE_ERROR.search("\n".join(text[m.end():].split("\n", 5)[:5])):
            stop = 0
    return stop


def _patch(prog: str, args: list[str], ctx: _Context, stdin: str | None) -> list[Event]:
    """``git apply P`` / ``patch -pN < P`` / ``patch -pN -i P``: edits of the files the patch text names, when the
    run wrote that text (a heredoc, ``cat <<EOF > P``); ``patch FILE P`` edits FILE. A check or a dry run edits
    nothing, nor does ``patch`` without ``-p`` on a plain diff (it would ask which file).

    >>> [(e.kind, e.path) for e in parse_shell("cat > fix.diff <<'EOF'\\n--- a/pkg/a.py\\n+++ b/pkg/a.py\\n@@ -1 +1 @@\\n"
    ...  "EOF\\npatch -p1 < fix.diff && git apply --check fix.diff && patch pkg/b.py b.diff") if e.kind != "run"]
    [('create', 'fix.diff'), ('edit', 'pkg/a.py'), ('edit', 'pkg/b.py')]
    >>> [(e.kind, e.path) for e in parse_shell("git apply - <<'EOF'\\n--- a/pkg/c.py\\n+++ b/pkg/c.py\\n@@ -1 +1 @@\\nEOF")
    ...  if e.kind != "run"]
    [('edit', 'pkg/c.py')]
    """
    from codegrep.mining.scripts import diff_targets

    if prog == "git":
        pos, opts = _positionals(args, {"-p", "-C", "--directory", "--exclude", "--include"})
        if {"--check", "--stat", "--numstat", "--summary", "--cached"} & set(opts):
            return []
        strip = opts.get("-p", "1")
        texts = [stdin if p == "-" else ctx.text(p) for p in pos] if pos else [stdin]  # git apply - : stdin
    else:
        pos, opts = _positionals(args, {"-p", "-i", "-d", "-o", "-r", "-B", "-D", "-F", "-V", "-z", "-Y", "--input",
                                        "--directory", "--output", "--strip", "--reject-file"})
        if {"--dry-run", "-o", "--output"} & set(opts):
            return []
        if pos:
            return [ctx.event("edit", pos[0])]
        strip = opts.get("-p") or opts.get("--strip")
        source = opts.get("-i") or opts.get("--input")
        texts = [ctx.text(source) if source else stdin]
    base = opts.get("-d") or opts.get("--directory") or ""
    number = int(strip) if strip and strip.isdigit() else None
    targets = [posixpath.join(base, t) for text in texts if text for t in diff_targets(text, number)]
    for t in targets:
        ctx.written(t, None)
    return [ctx.event("edit", t) for t in dict.fromkeys(targets)]


_SHELLS = {"bash", "sh", "zsh", "dash"}
_MAX_DEPTH = 4  # scripts that run scripts: as deep as this


def _subshell(args: list[str], ctx: _Context, stdin: str | None) -> list[Event]:
    """``bash -c 'cmd'``, ``bash script.sh`` of a script the run wrote, ``bash <<EOF``: the commands run in a child
    shell (a cd there does not come back).

    >>> [(e.kind, e.path) for e in parse_shell("cat <<'EOF' > t.sh\\ncat pkg/a.py\\nEOF\\nbash t.sh && sh -c 'grep -n x pkg/b.py'")]
    [('create', 't.sh'), ('run', None), ('view', 'pkg/a.py'), ('run', None), ('search', 'pkg/b.py')]
    """
    code, i = stdin, 0
    while i < len(args):
        a = args[i]
        if a == "-c" or (a.startswith("-") and not a.startswith("--") and a.endswith("c")):
            code = args[i + 1] if i + 1 < len(args) else None
            break
        if not a.startswith("-"):
            code = ctx.text(a)
            break
        i += 1
    if not code or ctx.depth >= _MAX_DEPTH:
        return []
    events, _, stateful = _parse_shell(code, ctx.step, ctx.root, ctx.cwd, ctx.paths, ctx.files, ctx.depth + 1,
                                       ctx.output)
    ctx.stateful |= stateful
    return events


def _git_read(sub: str, args: list[str], ctx: _Context) -> list[Event]:
    """``git show REV:path`` shows a file (the path is from the repository root, or from the working directory
    when it begins ``./``); ``git blame [-L a,b] f`` shows f's lines. ``git show REV [-- f]`` shows a commit: no read.

    >>> [(e.path, e.lines) for c in ("git show HEAD:pkg/a.py", "cd pkg && git show HEAD~1:./b.py", "git show abc -- pkg/c.py",
    ...  "git blame -L 10,20 pkg/d.py") for e in parse_shell(c) if e.kind == "view"]
    [('pkg/a.py', None), ('pkg/b.py', None), ('pkg/d.py', (10, 20))]
    """
    pos, opts = _positionals(args, {"-L", "--format", "--pretty", "-C", "-S", "--contents"})
    if sub == "blame":
        lines = _sed_lines((opts.get("-L") or "") + "p")
        return [ctx.event("view", p, lines=lines) for p in pos[-1:]]
    out = []
    for p in pos:
        rev, colon, path = p.partition(":")
        if colon and rev and path and not (ctx.output and unread(path, ctx.output)):  # path 'x' does not exist
            out.append(ctx.event("view", path) if path.startswith("./") or path.startswith("../") else
                       Event("view", ctx.step, repo_path(path, ctx.root)))
    return out


def _git_revert(sub: str, args: list[str], ctx: _Context) -> list[Event]:
    """``git checkout [HEAD] [--] f`` and ``git restore [--worktree] f`` put f back as the commit holds it: a
    ``revert`` of f (a branch name reverts no file the run changed). From another revision (``git checkout REV -- f``,
    ``git restore -s REV f``), a new branch, or ``git restore --staged`` alone (the index only): no revert.

    >>> [(e.kind, e.path) for c in ("git checkout pkg/a.py", "git checkout HEAD -- pkg/b.py", "git restore pkg/c.py",
    ...  "git checkout v1.0 -- pkg/d.py", "git restore --staged pkg/e.py", "git checkout -b fix") for e in parse_shell(c)]
    [('revert', 'pkg/a.py'), ('run', None), ('revert', 'pkg/b.py'), ('run', None), ('revert', 'pkg/c.py'), ('run', None), ('run', None), ('run', None), ('run', None)]
    """
    valued = {"-s", "--source", "-b", "-B", "--orphan"}
    pos, opts = _positionals(args, valued)
    rev = [a for a in _positionals(args[:args.index("--")], valued)[0]] if "--" in args else []
    paths = args[args.index("--") + 1:] if "--" in args else pos
    staged_only = ("--staged" in opts or "-S" in opts) and not ("--worktree" in opts or "-W" in opts)
    if opts.keys() & {"-b", "-B", "--orphan"} or staged_only or rev not in ([], ["HEAD"]) \
            or (opts.get("-s") or opts.get("--source") or "HEAD") != "HEAD":
        return []
    return [ctx.event("revert", p) for p in paths if p != "HEAD"]


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
    while words and (words[0] in _KEYWORDS or "=" in words[0] and not words[0].startswith("-")
                     and words[0].split("=")[0].isidentifier()):
        words.pop(0)  # FOO=1 cmd; then cmd; do cmd
    if words[:1] and words[0] in _HEADERS:
        words = []  # for f in a b; done; fi: runs nothing
    while words and words[0] in _WRAPPERS:
        prog = words.pop(0)
        if prog == "timeout" and words:
            pos, _ = _positionals(words, _VALUED["timeout"])
            words = words[words.index(pos[0]) + 1:] if pos else []
    events = [ctx.event("edit" if append else "create", p) for p, append in stage.writes]
    prog, args = (words[0].rpartition("/")[2], words[1:]) if words else ("", [])
    stdin = None if stage.stdin is None else ctx.stdin(stage)
    for p, append in stage.writes:  # cat <<EOF > f: the run knows what f holds (a script it may run, a patch)
        ctx.written(p, stdin if prog in ("cat", "") and not args else None, append)
    if not words:
        return events
    ctx.piped = not first or stage.stdin is not None  # a searcher reading its input searches no repository files
    if stage.stdin and not stage.stdin.startswith(HEREDOC) and (prog in _READERS or prog in _SEARCHERS):
        args = [*args, stage.stdin]  # cat < f, grep p < f: f is read
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
    elif prog == "git" and args[:1] in (["show"], ["blame"]):
        events += _git_read(args[0], args[1:], ctx)
        events.append(Event("run", ctx.step, command=" ".join(words)[:200]))
    elif prog == "git" and args[:1] in (["checkout"], ["restore"]):
        events += _git_revert(args[0], args[1:], ctx)
        events.append(Event("run", ctx.step, command=" ".join(words)[:200]))
    elif prog == "find":
        events += _find(args, ctx)
    elif prog in _SCRIPTED:
        events += _one_liner(prog, args, ctx)
    elif prog in _SHELLS:
        events.append(Event("run", ctx.step, command=" ".join(words)[:200]))
        events += _subshell(args, ctx, stdin)
    elif prog in ("ls", "tree"):
        pos, _ = _positionals(args, _VALUED[prog])
        for path in [ctx.path(p) for p in pos] or [ctx.cwd]:  # ls pkg/test_*: finds the files the wildcard matches
            split = glob_split(path)
            events.append(Event("find", ctx.step, *split) if split else Event("list", ctx.step, path))
    elif prog in ("touch", "mkdir") or prog == "tee":
        append = prog == "tee" and ("-a" in args or "--append" in args)  # tee -a f: adds to f
        events += [ctx.event("edit" if append else "create", p) for p in _positionals(args, set())[0]] \
            if prog != "mkdir" else []
        for p in _positionals(args, set())[0] if prog == "tee" else []:
            ctx.written(p, stdin, append)
    elif prog == "patch" or (prog == "git" and args[:1] == ["apply"]):
        events += _patch(prog, args[1:] if prog == "git" else args, ctx, stdin)
        events.append(Event("run", ctx.step, command=" ".join(words)[:200]))
    elif prog.startswith("python") and _PYTHON.match(prog):
        events.append(Event("run", ctx.step, command=" ".join(words)[:200]))
        events += _python(args, ctx, stdin)
    elif prog == "truncate" or prog in _IN_PLACE or f"{prog} {args[0] if args else ''}" in _IN_PLACE:
        events += _rewrite(prog, args, ctx)
    elif prog == "rm":
        events += [ctx.event("delete", p) for p in _positionals(args, set())[0]]
    elif prog in ("cp", "mv"):
        pos = _positionals(args, set())[0]
        events += ([ctx.event("delete", pos[0])] if prog == "mv" and len(pos) == 2 else [])
        events += [ctx.event("create", pos[-1])] if len(pos) >= 2 else []
    elif prog not in _QUIET:
        events.append(Event("run", ctx.step, command=" ".join(words)[:200]))
    return events


def _attach_range(view: Event | None, stage: _Stage) -> bool:
    """``nl -ba f | sed -n 'a,bp'`` / ``cat f | head -n N``: the range belongs to ``view``, the one file view whose
    lines the pipe carries, counted from where that view starts (``tail -n +K f | head -n N`` is lines K..K+N-1) and
    within where it ends (``head -n 152 f | tail -n 10`` is lines 143-152). ``tail -n N f`` (the last N lines) ends
    where the file does, which is not known: no range, nor for what is taken from it. True when what the stage
    passes on is still lines of ``view`` (a range taken, or ``cat``/``nl`` numbering them); False when the pipe then
    carries no one file's known lines (``cat a b``, a ``grep`` between, a regex ``sed``).

    >>> [e.lines for c in ("tail -n +100 a.py | head -n 20", "sed -n '5,$p' a.py | sed -n '2,3p'", "tail -5 a.py | head -2",
    ...  "head -n 152 a.py | tail -n 10", "sed -n '100,200p' a.py | head -5", "head -n 30 a.py | sed -n '20,40p'",
    ...  "cat a.py | tail -n 5", "cat -n a.py | grep -v x | head -3", "sed -n '10,30p' a.py | cat -n | head -2")
    ...  for e in parse_shell(c)]
    [(100, 119), (6, 7), None, (143, 152), (100, 104), (20, 30), None, None, (10, 11)]
    >>> [(e.path, e.lines) for e in parse_shell("cat a.py b.py | head -n 40")]
    [('a.py', None), ('b.py', None)]
    """
    prog, args = stage.words[0].rpartition("/")[2] if stage.words else "", stage.words[1:]
    if view is None or prog not in ("sed", "head", "tail", "cat", "nl"):
        return False
    pos, opts = _positionals(args, _VALUED.get(prog, set()), _SED_SCRIPTS if prog == "sed" else frozenset())
    if pos[1:] if prog == "sed" else pos:
        return False  # the stage reads its own files
    if prog in ("cat", "nl"):
        return True
    start, end = view.lines or (1, -1)
    n = opts.get("-n") or next((k[1:] for k in opts if k[1:].isdigit()), None)
    if prog == "tail":
        if n and n[0] == "+" and n[1:].isdigit():
            lines = (int(n[1:]), -1)
        elif n and n.isdigit() and end != -1:  # the last N lines of a range whose end is known
            view.lines = (max(start, end - int(n) + 1), end)
            return True
        else:
            return False
    elif prog == "sed":
        lines = _sed_lines(_sed_script(opts) or (pos[0] if pos else ""))
    else:
        lines = (1, int(n)) if n and n.isdigit() else None
    if not lines:
        return False
    first = start + lines[0] - 1
    last = end if lines[1] == -1 else start + lines[1] - 1 if end == -1 else min(end, start + lines[1] - 1)
    if last != -1 and first > last:  # past the end of what the view showed: nothing shown, the view stays
        return False
    view.lines = (first, last)
    return True


_PLAIN = frozenset(";&|\n()<>'\"\\#")  # a command free of these is whitespace-separated words, nothing else


def _pipelines(command: str) -> tuple[list[list[_Stage]], list[str]]:
    """(``_split(tokenize(...))`` of the command lines, the heredoc bodies their stages read); a command of plain
    words (a third of real ones: ``cat a.py``, ``python x.py``) skips the tokeniser: its words are ``command.split()``."""
    if _PLAIN.isdisjoint(command):
        words = command.split()
        return ([[_Stage(words)]] if words else []), []
    lines, bodies = _heredocs(command, placeholder=True)
    return _split(tokenize(lines)), bodies


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
        self.files: dict[str, str] = {}  # repository path -> the text the run wrote there (heredocs, editors)

    def __call__(self, command: str, step: int = 0, cwd: str | None = None, output: str | None = None,
                 exit_code: int | None = None) -> list[Event]:
        """Events of ``command`` run in ``cwd`` (default: the root, or where the session's last command left it);
        ``output`` and ``exit_code``: what it printed and its exit status, where the run recorded them (a script
        that stopped on an error before its writes wrote nothing: ``_stopped_at``); with ``exit_code`` None the
        status the output states is read from it (``formats.base.exit_code_in``), only where it matters."""
        start = (self.cwd if self.persistent else "") if cwd is None else cwd
        key = (command, start)
        failed = bool(output) and _UNREAD.search(output) is not None  # its views depend on its output (``unread``)
        done = None if failed else self.commands.get(key)
        if done is None:
            events, end, stateful = _parse_shell(command, step, self.root, start, self.paths, self.files,
                                                 output=output, exit_code=exit_code)
            if not stateful and not failed:
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

    def wrote(self, raw: str, text: str | None) -> None:
        """The run wrote ``text`` to ``raw`` by other means than the shell (an editor's ``create``); None: the
        file changed in a way not known (its text is forgotten)."""
        path = self.path(raw)
        if path is None:
            return
        if text is None:
            self.files.pop(path, None)
        else:
            self.files[path] = text


def parse_shell(command: str, step: int = 0, root: str | None = None, cwd: str = "") -> list[Event]:
    """Events of one bash command line (several commands, pipes and heredocs allowed)."""
    return _parse_shell(command, step, root, cwd)[0]


def _parse_shell(command: str, step: int, root: str | None, cwd: str, paths: dict | None = None,
                 files: dict | None = None, depth: int = 0, output: str | None = None,
                 exit_code: int | None = None) -> tuple[list[Event], str, bool]:
    """(events, the working directory the command line leaves its shell in, whether the command read or wrote
    the run's known file contents, or its events depend on its output: its events may differ when it runs again)."""
    ctx = _Context(step, root, cwd, paths, files)
    ctx.depth, ctx.output, ctx.exit_code = depth, output, exit_code
    pipelines, ctx.bodies = _pipelines(command)
    events: list[Event] = []
    outer: list[str] = []  # the working directories of the shells around the subshells now open
    last = max((i for i, p in enumerate(pipelines) if p[0] is not _SUBSHELL["("] and p[0] is not _SUBSHELL[")"]),
               default=-1)
    for n, pipeline in enumerate(pipelines):
        if pipeline[0] is _SUBSHELL["("]:
            outer.append(ctx.cwd)
            continue
        if pipeline[0] is _SUBSHELL[")"]:
            ctx.cwd = outer.pop() if outer else ctx.cwd
            continue
        pipe_events: list[Event] = []
        shown: Event | None = None  # the one file view whose lines the pipe carries (``_attach_range``)
        for i, stage in enumerate(pipeline):
            ctx.last = n == last and i == len(pipeline) - 1
            if i and stage.words and not _attach_range(shown, stage):
                shown = None
            new = _stage_events(stage, ctx, i == 0, pipe_events)
            views = [e for e in new if e.kind == "view"]
            if views:  # tail -n N f: the last N lines, whose numbers are not known
                last_lines = views[0].lines is None and stage.words[:1] == ["tail"]
                shown = views[0] if len(views) == 1 and not last_lines else None
            pipe_events += new
        events += pipe_events
    return [e for e in events if e.kind in ("run", "search", "find", "list") or e.path is not None], ctx.cwd, ctx.stateful

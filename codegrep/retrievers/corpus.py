"""What the one-shot retrievers index: the text files of a checkout, a cache key for them, code tokens.

A checkout is either a worktree at a known commit (key: ``repo@commit``) or a user's live tree
(key: a hash of the ``(path, size, mtime)`` listing, so edits invalidate the cache).
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
from collections import Counter
from functools import lru_cache
from pathlib import Path

from codegrep.config import cache_dir
from codegrep.env.textops import display_path, raw_path

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox",
                       ".mypy_cache", ".pytest_cache", "build", "dist", ".eggs", "site-packages"})
BINARY_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".ico", ".pdf", ".zip", ".gz", ".tar", ".whl",
                             ".so", ".dll", ".dylib", ".pyc", ".pyo", ".o", ".a", ".bin", ".npy", ".npz",
                             ".pkl", ".pickle", ".db", ".sqlite", ".woff", ".woff2", ".ttf", ".otf", ".eot",
                             ".mo", ".jar", ".class", ".exe", ".bz2", ".xz", ".7z", ".mp3", ".mp4", ".wav"})
DEFAULT_MAX_FILE_BYTES = 500_000

# Words that occur in nearly every issue or source file and carry no location signal.
STOPWORDS = frozenset("""
a an and are as at be been but by can could did do does doesn don for from had has have how i if in into is it
its just like may me might more my no not of on or our should so some such than that the their them then there
these they this those to too up us was we were what when where which while who why will with would you your
self def return import none true false elif else pass raise try except finally lambda yield assert del global
nonlocal print args kwargs cls also
""".split())
_WORD = re.compile(r"[A-Za-z0-9_]+")
_WORD_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_WORD_BYTES = bytes(c if c in _WORD_CHARS else 32 for c in range(256))  # everything else becomes a space
_SPLIT: dict[bytes, tuple[str, ...]] = {}
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@lru_cache(maxsize=500_000)
def identifier_tokens(ident: str) -> tuple[str, ...]:
    """Lowercased sub-words of one identifier, plus the whole identifier when it is compound.

    >>> identifier_tokens("getHTTPResponse_code")
    ('gethttpresponse_code', 'get', 'http', 'response', 'code')
    >>> identifier_tokens("the"), identifier_tokens("x")
    ((), ())
    """
    parts = [p.lower() for p in _CAMEL.findall(ident)]
    parts = [p for p in parts if len(p) > 1 and p not in STOPWORDS and not p.isdigit()]
    whole = ident.lower().strip("_")
    compound = [whole] if len(parts) > 1 or (parts and parts[0] != whole) else []
    if whole in STOPWORDS or len(whole) < 2:
        compound = []
    return tuple(compound + parts)


def tokenize(text: str) -> list[str]:
    """Code-aware tokens: identifiers split on snake_case, camelCase, dots and slashes.

    >>> tokenize("QuerySet.bulk_create() fails in db/models/query.py")
    ['queryset', 'query', 'set', 'bulk_create', 'bulk', 'create', 'fails', 'db', 'models', 'query', 'py']
    """
    out: list[str] = []
    for word in _WORD.findall(text):
        out.extend(identifier_tokens(word))
    return out


def tokenize_counts(data: bytes | str) -> dict[str, int]:
    """Token counts of a document (the same tokens as :func:`tokenize`), fast on large files: words are cut
    with ``bytes.translate``/``split`` in C and each distinct word is split into sub-words once per process.

    >>> sorted(tokenize_counts(b"fooBar foo_bar fooBar").items())
    [('bar', 3), ('foo', 3), ('foo_bar', 1), ('foobar', 2)]
    >>> tokenize_counts("x = QuerySet()") == dict(Counter(tokenize("x = QuerySet()")))
    True
    """
    if isinstance(data, str):
        data = data.encode("utf-8", errors="replace")
    if len(_SPLIT) > 2_000_000:  # bound memory across many repositories
        _SPLIT.clear()
    counts: dict[str, int] = {}
    get = counts.get
    for word, n in Counter(data.translate(_WORD_BYTES).split()).items():
        toks = _SPLIT.get(word)
        if toks is None:
            toks = _SPLIT[word] = identifier_tokens(word.decode("ascii"))
        for tok in toks:
            counts[tok] = get(tok, 0) + n
    return counts


def is_text(data: bytes) -> bool:
    """Heuristic used by git and ripgrep: a NUL byte in the first 8 KB means binary.

    >>> is_text(b"def f():\\n"), is_text(b"\\x00\\x01")
    (True, False)
    """
    return b"\x00" not in data[:8192]


def regular_size(path: str) -> int | None:
    """Bytes of a regular file, None for anything else: a symlink (it may lead outside the checkout, dangle or loop)
    or a FIFO, socket or device of a live tree (reading a FIFO blocks until a writer comes, so an index build hung).

    >>> regular_size("/dev/null") is None, regular_size("/no/such/file") is None
    (True, True)
    """
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def git_ignored(root: Path) -> frozenset[bytes]:
    """Untracked paths (relative to ``root``; a whole ignored folder as ``dir/``) that the ignore files of the git
    work tree holding ``root`` hide: a live checkout's build outputs (``distribution/``, ``coverage/``, Maven's
    ``target/``), which the tools' ripgrep listing hides too. Empty outside git (or where git fails); a tracked
    file is never in it, whatever the ignore files say."""
    import subprocess

    try:
        proc = subprocess.run(["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                              cwd=root, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(p for p in proc.stdout.split(b"\0") if p) if proc.returncode == 0 else frozenset()


def list_files(root: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> list[str]:
    """Repository-relative POSIX paths of candidate files: regular files (:func:`regular_size`) outside VCS/build
    dirs and outside what the git ignore files hide (:func:`git_ignored`), binaries by suffix and big files left
    out."""
    root = Path(root)
    ignored = git_ignored(root)
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        under = b"" if rel_dir == "." else os.fsencode(rel_dir.replace(os.sep, "/")) + b"/"
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")
                             and under + os.fsencode(d) + b"/" not in ignored)
        for name in sorted(filenames):
            if Path(name).suffix.lower() in BINARY_SUFFIXES or under + os.fsencode(name) in ignored:
                continue
            size = regular_size(os.path.join(dirpath, name))
            if size is None or size > max_bytes:
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            out.append(display_path(os.fsencode(rel)))  # a non-UTF-8 name as the tools show it (caf\xe9.py)
    return out


def fs_path(root: Path, rel: str) -> Path:
    """The file a :func:`list_files` name stands for (escaped non-UTF-8 names mapped back to their bytes)."""
    return Path(root) / os.fsdecode(raw_path(rel))


def read_bytes(root: Path, rel: str) -> bytes | None:
    """File contents, or None for binary/unreadable files."""
    try:
        data = fs_path(root, rel).read_bytes()
    except OSError:
        return None
    return data if is_text(data) else None


def read_text(root: Path, rel: str) -> str | None:
    """File contents as text, or None for binary/unreadable files."""
    data = read_bytes(root, rel)
    return None if data is None else data.decode("utf-8", errors="replace")


def listing_hash(root: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str:
    """Hash of the ``(path, size, mtime)`` listing of a live tree: changes whenever a file does."""
    h = hashlib.sha1()
    for rel in list_files(root, max_bytes):
        st = os.stat(fs_path(root, rel))
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


_FULL_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def checkout_sha(root: Path) -> str | None:
    """The full commit SHA a git checkout ``root`` holds (its HEAD), or None where ``root`` is not the top of one."""
    import subprocess

    try:
        proc = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.split()
    if proc.returncode or len(lines) != 2 or not _FULL_SHA.fullmatch(lines[1]):
        return None
    return lines[1] if Path(lines[0]).resolve() == Path(root).resolve() else None


def snapshot_key(repo: str, commit: str | None, root: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str:
    """A filesystem-safe key for one repository snapshot.

    Only an immutable name keys by the commit: a full SHA as given, any other name (a branch, ``HEAD``, a tag, a
    short SHA) by the SHA the checkout holds, or by the live listing where ``root`` is not a git checkout.

    >>> snapshot_key("psf/requests", "0123456789abcdef0123456789abcdef01234567", Path("."))
    'psf__requests@0123456789abcdef0123456789abcdef01234567'
    """
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", (repo or Path(root).resolve().name).replace("/", "__"))
    if commit and not _FULL_SHA.fullmatch(commit):
        commit = checkout_sha(Path(root))  # a branch moves: its name would serve a stale index
    return f"{slug}@{commit}" if commit else f"{slug}@live-{listing_hash(root, max_bytes)}"


def index_dir(kind: str, key: str) -> Path:
    """``cache_dir()/indexes/<kind>/<key>``: where one retriever's index of one snapshot lives."""
    return cache_dir() / "indexes" / kind / key


def prune_live_siblings(path: Path) -> None:
    """Delete older live-tree indexes of the same tree and settings (every edit makes a new key)."""
    import shutil

    name = path.name
    if "@live-" not in name:
        return
    prefix, suffix = name.split("@live-", 1)[0], name.rsplit("-", 1)[-1]
    for other in path.parent.glob(f"{prefix}@live-*-{suffix}"):
        if other != path and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)

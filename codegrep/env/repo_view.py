"""One repository view for both environment modes: argument checks, the file set, the search and formatting.

A mode provides a *listing* (display name -> where its bytes are) and a way to read one file; everything
else is here, so the worktree and checkout-free modes answer identically by construction:

* the file set is the listing (committed files in both modes; a live directory also applies its ignore
  files); names that are not clean UTF-8 text (a newline, a non-UTF-8 byte) are shown escaped
  (:func:`codegrep.env.textops.display_path`) and accepted back in that form;
* ``grep`` is always ripgrep, single-threaded, over the listed files in display order, given as explicit
  paths (a checkout's files, or the blob files of the content-addressed store in checkout-free mode), so the
  regex engine, binary detection, ``max_file_bytes``, long-line clipping and the order are the same;
* ``glob`` and ``read`` are computed from the listing and the bytes.
"""
from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from codegrep.env import textops
from codegrep.env.arguments import bool_arg, int_arg, parse_arguments
from codegrep.env.config import ToolConfig
from codegrep.env.contract import TOOL_NAMES, ToolCall, ToolError, ToolResult
from codegrep.env.procs import find_rg, run_capped
from codegrep.env.sandbox import SandboxError, check_glob, check_regex, clean_relative_path

_ARG_CHUNK_BYTES = 256_000  # explicit paths per ripgrep invocation (far below ARG_MAX)
ROW_HEAD = re.compile(rb"(\d+)([:-])")
"""The start of the part of a ripgrep row after the path: the line number and ``:`` (a hit) or ``-`` (context)."""


class Listing:
    """The files of one snapshot: sorted display names and, per name, the path ripgrep is given."""

    def __init__(self, names_to_disk: dict[str, bytes], sizes: dict[str, int] | None = None) -> None:
        self.sizes = sizes
        """Bytes per name when known up front (checkout-free mode); else stat-ed on demand and kept."""
        self.names = sorted(names_to_disk, key=lambda p: p.split("/"))  # ripgrep's --sort=path order
        self.disk = names_to_disk
        self.name_set = set(names_to_disk)
        self.by_disk: dict[bytes, list[str]] = {}
        for name in self.names:
            self.by_disk.setdefault(names_to_disk[name], []).append(name)


class ToolEnvironmentBase:
    """Read-only grep/glob/read over one repository snapshot (implements ``codegrep.ToolEnvironment``)."""

    def __init__(self, config: ToolConfig | None = None) -> None:
        self.config = config or ToolConfig()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # --- what a mode implements ------------------------------------------------------------------
    def _listing(self) -> Listing:
        raise NotImplementedError

    def _search_cwd(self) -> str:
        """Directory ripgrep runs in (the ``disk`` paths of the listing are relative to it)."""
        raise NotImplementedError

    def _prepare(self, names: list[str]) -> None:
        """Make sure the files of ``names`` are on disk before ripgrep reads them (checkout-free mode)."""

    def _canonical(self, rel: str) -> str:
        """``rel`` with symlinks inside the snapshot resolved (refuses links that leave it)."""
        return rel

    def _exists(self, rel: str) -> bool:
        """Whether ``rel`` names anything (an empty directory of a live checkout counts)."""
        return False

    def _read_bytes(self, rel: str) -> bytes:
        raise NotImplementedError

    def _size(self, name: str) -> int:
        """Bytes of a listed file (``max_file_bytes`` applies to grep in both modes alike)."""
        raise NotImplementedError

    @contextmanager
    def _changes(self) -> Iterator[Callable[[bytes, list[bytes], bool], bool]]:
        """For one grep: a function telling whether ripgrep's ``rows`` (``N:text``, ``N-text``; ``b""`` a gap) for
        ``disk`` are not that file's lines any more (``shown``: rows that can be shown; the others only count). A
        live checkout can change under a search; checkout-free mode's blob files never do."""
        yield lambda disk, rows, shown: False

    def snapshot_id(self) -> tuple | None:
        """What names this snapshot across environments (indexes built from it are shared); None: not shared."""
        return None

    # --- public API ------------------------------------------------------------------------------
    def file_contents(self, max_bytes: int, keep: Callable[[str], bool] | None = None,
                      ) -> Iterator[tuple[str, bytes | None]]:
        """Each listed file of at most ``max_bytes`` (and, with ``keep``, that ``keep`` accepts: the others are not
        read) with its bytes (None where the tools refuse to read it or it is binary), in listing order: what an
        index of this snapshot is built from, as the tools see it."""
        for name in self._listing().names:
            if self._size(name) > max_bytes or (keep is not None and not keep(name)):
                continue
            try:
                data = self._read_bytes(name)
            except (ToolError, SandboxError, OSError):
                data = None
            # binary as git and ripgrep judge it (a NUL in the first 8 KB; retrievers.corpus.is_text, a layer up)
            yield name, (data if data is not None and b"\0" not in data[:8192] else None)

    def run_turn(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run one turn's calls in parallel (bounded pool); results come back in call order."""
        if len(calls) <= 1:
            return [self.call(c) for c in calls]
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=max(1, self.config.workers),
                                                    thread_name_prefix="codegrep-tool")
        return list(self._executor.map(self.call, calls))

    def call(self, call: ToolCall) -> ToolResult:
        """Answer one call; every failure becomes an ``ok=False`` result, never an exception."""
        start = time.perf_counter()
        name = call.name if isinstance(call.name, str) else repr(call.name)
        try:
            if name not in TOOL_NAMES:
                raise ToolError(f"unknown tool {name!r}; available tools: {', '.join(TOOL_NAMES)}")
            args = parse_arguments(call)
            output, truncated, *shown = getattr(self, f"_tool_{name}")(**args)  # grep: also the names it shows
            result = ToolResult(name, True, output=output, truncated=truncated, files=tuple(shown[0]) if shown else ())
        except (ToolError, SandboxError) as exc:
            result = ToolResult(name, False, error=str(exc))
        except TypeError as exc:  # missing required argument
            result = ToolResult(name, False, error=f"bad arguments for {name}: {exc}")
        except Exception as exc:  # an internal failure must not kill the rollout
            result = ToolResult(name, False, error=f"internal error in {name}: {type(exc).__name__}: {exc}")
        result.latency_ms = (time.perf_counter() - start) * 1000.0
        result.bytes_out = len(result.text().encode("utf-8", "replace"))
        return result

    def close(self) -> None:
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- the shared view -------------------------------------------------------------------------
    def _path_arg(self, path: object, required: bool = False) -> str:
        """A listed name as given (escaped names included), else a cleaned repository-relative path."""
        if isinstance(path, str) and path and path in self._listing().name_set:
            return path
        rel = clean_relative_path(path)  # type: ignore[arg-type]
        if required and not rel:
            raise ToolError("path is required: a repository-relative file path")
        return rel

    def _files(self, rel: str) -> list[str]:
        """Listed files at or under ``rel`` (display order); a missing path is an error."""
        listing = self._listing()
        if not rel:
            return listing.names
        if rel in listing.name_set:
            return [rel]
        rel = self._canonical(rel)
        if rel in listing.name_set:
            return [rel]
        prefix = rel + "/"
        hits = [p for p in listing.names if p.startswith(prefix)]
        if not hits and not self._exists(rel):
            raise ToolError(f"{rel} does not exist in the repository")
        return hits

    def _grep_lines(self, pattern: str, files: list[str], ignore_case: bool,
                    context: int) -> tuple[list[str], bool, list[str], list[str]]:
        """``path:line:text`` (context ``path-line-text``, groups split by ``--``) for ``files``, in order;
        whether the raw output was cut (the cap) before all files were searched; the names the lines start
        with (their ``path`` is one of them: a name may hold ``:12:``, :attr:`ToolResult.files`); and the files whose
        hits are left out because they changed under the search (:meth:`_changed`). ``files`` are at most
        ``max_file_bytes`` each (:meth:`_tool_grep` leaves the others out: ripgrep ignores --max-filesize for
        explicit paths)."""
        listing, cfg = self._listing(), self.config
        self._prepare(files)
        disks = list(dict.fromkeys(listing.disk[f] for f in files))
        base = [find_rg(), "--no-config", "--color=never", "--no-heading", "--with-filename", "--null",
                "--line-number", "--no-ignore", "--hidden", "--threads=1", f"--max-columns={cfg.max_line_chars}", "--max-columns-preview"]
        base += ["--ignore-case"] if ignore_case else []
        base += [f"--context={context}"] if context else []
        base += ["-e", pattern, "--"]
        chunks: dict[bytes, list[bytes]] = {}
        capped, i = False, 0
        # a large repository needs several ripgrep runs (ARG_MAX): the call's timeout and capture cap bound all
        # of them together, as they bound the one run of a smaller repository
        left_s, left_bytes = cfg.timeout_s, cfg.capture_bytes
        while i < len(disks) and not capped:
            batch, size = [], 0
            while i < len(disks) and (not batch or size + len(disks[i]) < _ARG_CHUNK_BYTES):
                batch.append(disks[i])
                size += len(disks[i]) + 1
                i += 1
            cap = None if left_s <= 0 else run_capped([*base, *batch], self._search_cwd(), left_s, left_bytes)
            if cap is None or cap.timed_out:
                raise ToolError(f"timed out after {cfg.timeout_s:g}s; use a simpler pattern or a narrower path")
            left_s, left_bytes = left_s - cap.seconds, left_bytes - len(cap.stdout)
            if cap.returncode not in (0, 1, None) and not cap.stdout:
                msg = cap.stderr.decode("utf-8", "replace").strip()
                raise ToolError(msg.replace(find_rg(), "rg")[:1000] or f"rg failed with status {cap.returncode}")
            capped = cap.capped
            last, gap = None, False
            data, pos, known = cap.stdout, 0, set(batch)
            while pos < len(data):  # records are `path NUL line-number [:-] text LF`; a path may hold a LF
                if data.startswith(b"--\n", pos):
                    gap, pos = True, pos + 3
                    continue
                nul = data.find(b"\0", pos)
                if nul != -1 and data[pos:nul] in known:
                    end = data.find(b"\n", nul)
                    if end == -1:
                        break  # the partial last line of a capped output
                    disk, rest, pos = data[pos:nul], data[nul + 1:end], end + 1
                    if ROW_HEAD.match(rest):
                        if gap and disk == last:  # a gap between two context groups of one file
                            chunks[disk].append(b"")
                        chunks.setdefault(disk, []).append(rest)
                        last, gap = disk, False
                    continue
                end = data.find(b"\n", pos)  # a message line ("binary file matches ..."): skipped
                if end == -1:
                    break
                pos = end + 1
        out: list[str] = []
        shown: list[str] = []
        left_out: list[str] = []
        with self._changes() as changed:
            for name in files:
                lines = chunks.get(listing.disk[name])
                if not lines:
                    continue
                if changed(listing.disk[name], lines, len(out) < cfg.max_output_lines):  # past the cap: only counted
                    left_out.append(name)
                    continue
                shown.append(name)
                if out and context:
                    out.append("--")
                for rest in lines:
                    if not rest:
                        out.append("--")
                        continue
                    m = ROW_HEAD.match(rest)
                    text, cut = rest[m.end():], rest.endswith(textops.RG_CLIPPED)
                    text = text[:-len(textops.RG_CLIPPED)] if cut else text
                    text = text.decode("utf-8", "replace")
                    if cut and text.endswith("\ufffd"):  # ripgrep's byte cut split the last character
                        text = text[:-1]
                    out.append(textops.grep_row(name, m.group(2).decode(), m.group(1).decode(), text,
                                                self.config.max_line_chars, cut))
        return out, capped, shown, left_out

    # --- the three tools -------------------------------------------------------------------------
    def _tool_grep(self, pattern=None, path=None, include=None, ignore_case=False,
                   context=0) -> tuple[str, bool] | tuple[str, bool, list[str]]:
        cfg = self.config
        pattern = check_regex(pattern)
        rel = self._path_arg(path)
        include = check_glob(include, what="include", required=False)
        ctx = int_arg(context, "context", 0, cfg.max_context) or 0
        files = self._files(rel)
        if include:
            keep, negate = textops.glob_to_regex(include.lstrip("!")), include.startswith("!")
            kept = set(self._matching(keep, files, rel + "/" if rel else ""))
            files = [f for f in files if (f in kept) != negate]
        if not files:
            return "No matches found.", False
        searched, skipped = [], []  # files over max_file_bytes are not searched; say so: not "no matches" in them
        for f in files:
            (searched if self._size(f) <= cfg.max_file_bytes else skipped).append(f)
        lines, capped, names, changed = self._grep_lines(pattern, searched, bool_arg(ignore_case, "ignore_case"), ctx)
        note = "\n".join(([textops.skipped_note(skipped, cfg.max_file_bytes, cfg.max_line_chars)] if skipped else [])
                         + ([textops.changed_note(changed, cfg.max_line_chars)] if changed else []))
        if not lines:
            return "No matches found." + (f"\n{note}" if note else ""), False
        # when the raw output hit the capture cap, the total is unknown: say so the same way in both modes
        text, truncated = textops.cap_lines(lines, cfg.max_output_lines, cfg.max_output_bytes,
                                            total=min(len(lines), cfg.max_output_lines) if capped else None,
                                            more=capped, what="lines", hint="narrow the pattern, path or include")
        # a CRLF line's \r dropped after the cap, which counted it, so the same lines fit (as read drops it)
        text = "\n".join(line[:-1] if line.endswith("\r") else line for line in text.split("\n"))
        if note:  # before the truncation note, which stays the last line
            head, _, tail = text.rpartition("\n") if truncated else (text, "", "")
            text = "\n".join(p for p in (head, note, tail) if p)
        return text, truncated, names

    def _matching(self, regex: re.Pattern, files: list[str], prefix: str) -> list[str]:
        """``files`` whose path (below ``prefix`` when under it) a compiled glob matches, within ``timeout_s``:
        Python's ``re`` backtracks, and some globs (``**/?**/?**/...``) are slow on every path of a large tree."""
        deadline, out = time.monotonic() + self.config.timeout_s, []
        for f in files:
            if time.monotonic() >= deadline:
                raise ToolError(f"timed out after {self.config.timeout_s:g}s; use a simpler pattern or a narrower path")
            if regex.match(f[len(prefix):] if prefix and f.startswith(prefix) else f):
                out.append(f)
        return out

    def _tool_glob(self, pattern=None, path=None) -> tuple[str, bool]:
        pattern = check_glob(pattern)
        rel = self._path_arg(path)
        regex = textops.glob_to_regex(pattern)
        prefix = rel + "/" if rel else ""
        hits = self._matching(regex, self._files(rel), prefix)
        if not hits:
            return "No files matched.", False
        return textops.cap_lines(hits, self.config.max_glob_results, self.config.max_output_bytes,
                                 what="paths", hint="use a more specific pattern or path")

    def _tool_read(self, path=None, start_line=None, end_line=None) -> tuple[str, bool]:
        cfg = self.config
        rel = self._path_arg(path, required=True)
        start = int_arg(start_line, "start_line", 1) or 1
        end = int_arg(end_line, "end_line", 1)
        if end is not None and end < start:
            raise ToolError(f"end_line ({end}) is before start_line ({start})")
        data = self._read_bytes(rel)
        if textops.is_binary(data):
            raise ToolError(f"{rel} is a binary file ({len(data)} bytes); only text files can be read")
        lines = textops.text_lines(data)  # numbered as grep numbers them
        if not lines:
            return f"({rel} is empty)", False
        if start > len(lines):
            raise ToolError(f"start_line {start} is past the end of {rel} ({len(lines)} lines)")
        window_end = min(end if end is not None else start + cfg.max_read_lines - 1, len(lines))
        last = min(window_end, start + cfg.max_read_lines - 1)
        body = textops.fit_bytes(textops.numbered(lines[start - 1:last], start, cfg.max_line_chars),
                                 cfg.max_output_bytes)
        shown_last = start + len(body) - 1
        if shown_last < window_end or (end is None and shown_last < len(lines)):
            body.append(f"[... truncated: showing lines {start}-{shown_last} of {len(lines)} in {rel}; "
                        "use start_line/end_line for more]")
            return "\n".join(body), True
        return "\n".join(body), False

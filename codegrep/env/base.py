"""What both environment modes share: argument checking, parallel turns, capping and formatting.

A subclass provides three primitives over one repository snapshot: ``_files(rel)`` (sorted file
paths under a directory), ``_read_bytes(rel)`` and ``_grep_lines(...)``. Everything the model sees
is formatted here, so the worktree and checkout-free modes answer identically.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from codegrep.env import textops
from codegrep.env.sandbox import SandboxError, check_glob, check_regex, clean_relative_path
from codegrep.env.tools import TOOL_NAMES, ToolCall, ToolConfig, ToolError, ToolResult, _arguments, _bool_arg, _int_arg


class ToolEnvironmentBase:
    """Read-only grep/glob/read over one repository snapshot (implements ``codegrep.ToolEnvironment``)."""

    def __init__(self, config: ToolConfig | None = None) -> None:
        self.config = config or ToolConfig()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # --- primitives a mode implements ------------------------------------------------------------
    def _files(self, rel: str) -> list[str]:
        raise NotImplementedError

    def _read_bytes(self, rel: str) -> bytes:
        raise NotImplementedError

    def _grep_lines(self, pattern: str, rel: str, include: str | None, ignore_case: bool,
                    context: int) -> tuple[list[str], bool]:
        """Sorted ``path:line:text`` lines and whether the raw output was cut before counting."""
        raise NotImplementedError

    # --- public API ------------------------------------------------------------------------------
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
            args = _arguments(call)
            output, truncated = getattr(self, f"_tool_{name}")(**args)
            result = ToolResult(name, True, output=output, truncated=truncated)
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

    # --- the three tools -------------------------------------------------------------------------
    def _tool_grep(self, pattern=None, path=None, include=None, ignore_case=False, context=0) -> tuple[str, bool]:
        cfg = self.config
        pattern = check_regex(pattern)
        rel = clean_relative_path(path)
        include = check_glob(include, what="include", required=False)
        ctx = _int_arg(context, "context", 0, cfg.max_context) or 0
        lines, more = self._grep_lines(pattern, rel, include, _bool_arg(ignore_case, "ignore_case"), ctx)
        if not lines:
            return "No matches found.", False
        lines = [textops.clip_line(line, cfg.max_line_chars) for line in lines]
        return textops.cap_lines(lines, cfg.max_output_lines, cfg.max_output_bytes, more=more, what="lines",
                                 hint="narrow the pattern, path or include")

    def _tool_glob(self, pattern=None, path=None) -> tuple[str, bool]:
        pattern = check_glob(pattern)
        rel = clean_relative_path(path)
        regex = textops.glob_to_regex(pattern)
        prefix = rel + "/" if rel else ""
        hits = [f for f in self._files(rel) if regex.match(f[len(prefix):] if f.startswith(prefix) else f)]
        if not hits:
            return "No files matched.", False
        hits.sort(key=lambda p: p.split("/"))  # ripgrep's --sort=path order, in both modes
        return textops.cap_lines(hits, self.config.max_glob_results, self.config.max_output_bytes,
                                 what="paths", hint="use a more specific pattern or path")

    def _tool_read(self, path=None, start_line=None, end_line=None) -> tuple[str, bool]:
        cfg = self.config
        rel = clean_relative_path(path)
        if not rel:
            raise ToolError("path is required: a repository-relative file path")
        start = _int_arg(start_line, "start_line", 1) or 1
        end = _int_arg(end_line, "end_line", 1)
        if end is not None and end < start:
            raise ToolError(f"end_line ({end}) is before start_line ({start})")
        data = self._read_bytes(rel)
        if textops.is_binary(data):
            raise ToolError(f"{rel} is a binary file ({len(data)} bytes); only text files can be read")
        lines = data.decode("utf-8", errors="replace").splitlines()
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

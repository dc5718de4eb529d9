"""The stdio transport in front of the MCP SDK's: every malformed line gets a JSON-RPC error reply.

The SDK's ``stdio_server`` turns a line it cannot parse into an exception on the session's read stream
and answers nothing, so a client waiting on that request hangs (reported upstream: docs/mcp.md). It does
accept caller-supplied streams, so instead of forking it we hand it a stdin that checks each line first
(:func:`check_line`): a line that is not JSON gets ``-32700 Parse error``, one that is JSON but not a
valid JSON-RPC 2.0 message (an array, a wrong ``jsonrpc``, an object ``id``, a missing ``method``) gets
``-32600 Invalid Request``, with the request's ``id`` when it is usable and ``null`` otherwise (JSON-RPC
2.0, section 5.1). Valid lines pass through untouched. Replies share one locked writer with the SDK's.
"""
from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from io import TextIOWrapper
from typing import Any, Iterator

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def _error(code: int, message: str, id_: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


MAX_LINE_BYTES = 8 << 20
"""Longest message line read (8 MiB); a longer one is answered ``-32700`` without being held in memory."""
MAX_DEPTH = 64
"""Deepest JSON nesting a message may have (MCP messages nest a few levels; a deeper line is refused unparsed,
so neither the parser nor the SDK's validation recurses on it)."""


def _depth(raw: bytes) -> int:
    """Deepest ``[``/``{`` nesting of a JSON text, brackets inside strings ignored.

    >>> _depth(b'{"a": [1, {"b": "[[["}]}')
    3
    """
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def check_line(raw: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error reply for a malformed line, or None for a valid message (or a blank line).

    >>> check_line(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\\n') is None
    True
    >>> check_line(b'{not json')["error"]["code"], check_line(b'\\xff\\xfe')["error"]["code"]
    (-32700, -32700)
    >>> check_line(b'[1, 2]')["error"]["code"], check_line(b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}')["id"]
    (-32600, 7)
    >>> check_line(b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}')
    {'jsonrpc': '2.0', 'id': None, 'error': {'code': -32600, 'message': 'Invalid Request: id must be a string or an integer'}}
    """
    if not raw.strip():
        return None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(raw) > MAX_DEPTH:
        return _error(PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return _error(PARSE_ERROR, f"Parse error: {type(exc).__name__}: {str(exc)[:200]}")
    if isinstance(data, list):
        return _error(INVALID_REQUEST, "Invalid Request: batches are not supported (MCP does not use JSON-RPC batching)")
    if not isinstance(data, dict):
        return _error(INVALID_REQUEST, f"Invalid Request: expected a JSON object, got {type(data).__name__}")
    id_ = data.get("id")
    usable_id = isinstance(id_, (str, int)) and not isinstance(id_, bool)
    reply_id = id_ if usable_id else None
    if "id" in data and not usable_id:
        return _error(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if data.get("jsonrpc") != "2.0":
        return _error(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be exactly "2.0"', reply_id)
    import mcp_types
    from pydantic import ValidationError

    try:
        mcp_types.jsonrpc_message_adapter.validate_python(data, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"msg": str(exc)}
        return _error(INVALID_REQUEST, f"Invalid Request: {first.get('msg', 'not a JSON-RPC message')}", reply_id)
    return None


class LockedWriter:
    """The async text writer both the SDK and the error replies use (one line at a time)."""

    def __init__(self, stream: Any) -> None:
        import anyio

        self._stream, self._lock = stream, anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._stream.write(text)

    async def flush(self) -> None:
        async with self._lock:
            await self._stream.flush()


class CheckedLines:
    """Async iterator over stdin lines for the SDK: valid ones are yielded, malformed ones answered."""

    def __init__(self, binary_in: Any, out: LockedWriter) -> None:
        self._in, self._out = binary_in, out
        self.rejected = 0

    async def _readline(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the next line (anyio's file wrapper has no size argument)."""
        import anyio

        return await anyio.to_thread.run_sync(self._in.wrapped.readline, limit)

    def __aiter__(self) -> "CheckedLines":
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await self._readline(MAX_LINE_BYTES + 1)
            if not raw:
                raise StopAsyncIteration
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):  # drop the rest unread, then answer
                while (rest := await self._readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                reply = _error(PARSE_ERROR, f"Parse error: message longer than {MAX_LINE_BYTES} bytes")
            else:
                reply = check_line(raw)
            if reply is None:
                if raw.strip():
                    return raw.decode("utf-8")
                continue
            self.rejected += 1
            await self._out.write(json.dumps(reply) + "\n")
            await self._out.flush()


@contextmanager
def claimed_stdio() -> Iterator[tuple[Any, Any]]:
    """Private binary handles on the real stdin/stdout while fd 0 reads /dev/null and fd 1 goes to stderr,
    so stray prints of a retriever or a child process cannot corrupt the wire (what the SDK does too)."""
    sys.stdout.flush()
    private_in, private_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    try:
        with os.fdopen(private_in, "rb") as fin, os.fdopen(private_out, "wb") as fout:
            yield fin, fout
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


async def serve_checked_stdio(server: Any) -> int:
    """Run ``server`` (an ``MCPServer``) on stdio behind :class:`CheckedLines`; returns lines rejected."""
    import anyio
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # the SDK's MCPServer.run_stdio_async does exactly this with its own streams
    with claimed_stdio() as (fin, fout):
        out = LockedWriter(anyio.wrap_file(TextIOWrapper(fout, encoding="utf-8", line_buffering=False)))
        lines = CheckedLines(anyio.wrap_file(fin), out)
        async with stdio_server(stdin=lines, stdout=out) as (read_stream, write_stream):  # type: ignore[arg-type]
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    return lines.rejected

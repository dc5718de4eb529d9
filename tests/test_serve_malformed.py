"""Malformed MCP messages over a real stdio session: each gets a JSON-RPC error reply (never silence),
and the server keeps answering valid requests afterwards."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codegrep.serve.transport import check_line

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MALFORMED = [  # (line, expected code, expected id)
    (b"{not json\n", -32700, None),
    (b"\xff\xfe\x00binary\n", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"\n', -32700, None),  # truncated
    (b"[]\n", -32600, None),
    (b'[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]\n', -32600, None),
    (b'"just a string"\n', -32600, None),
    (b"42\n", -32600, None),
    (b"null\n", -32600, None),
    (b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}\n', -32600, 3),
    (b'{"id": 4, "method": "ping"}\n', -32600, 4),
    (b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}\n', -32600, None),
    (b'{"jsonrpc": "2.0", "id": [5], "method": "ping"}\n', -32600, None),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}\n', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 6}\n', -32600, 6),
    (b'{"jsonrpc": "2.0", "id": 7, "method": 12}\n', -32600, 7),
    (b"{}\n", -32600, None),
]


@pytest.mark.parametrize("line,code,id_", MALFORMED, ids=range(len(MALFORMED)))
def test_check_line_classifies(line, code, id_):
    reply = check_line(line)
    assert reply is not None and reply["error"]["code"] == code and reply["id"] == id_ and reply["jsonrpc"] == "2.0"


def test_valid_messages_pass():
    for msg in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}},
                {"jsonrpc": "2.0", "id": 9, "result": {}}):
        assert check_line(json.dumps(msg).encode() + b"\n") is None
    assert check_line(b"\n") is None


def _read_reply(proc: subprocess.Popen, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            line = proc.stdout.readline()
            assert line, f"server closed stdout; stderr: {proc.stderr.read().decode()[-2000:]}"
            return json.loads(line)
    raise AssertionError("no reply within the timeout: a client waiting on this id would hang")


def test_stdio_server_answers_every_malformed_line_and_keeps_serving(tmp_path: Path):
    repo = tmp_path / "r"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("def parse():\n    pass\n")
    env = {**os.environ, "CODEGREP_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "codegrep", "mcp", "--repo", str(repo)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        proc.stdin.flush()
        assert _read_reply(proc)["id"] == 0
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for line, code, id_ in MALFORMED:
            proc.stdin.write(line)
            proc.stdin.flush()
            reply = _read_reply(proc, timeout=30)
            assert reply["error"]["code"] == code and reply["id"] == id_, (line, reply)
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 99, "method": "tools/list"}\n')
        proc.stdin.flush()
        listed = _read_reply(proc)
        assert listed["id"] == 99 and [t["name"] for t in listed["result"]["tools"]] == ["find_relevant_files"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0

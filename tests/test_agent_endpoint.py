"""The OpenAI-compatible endpoint policy against a REAL local server process (``transformers serve``, CPU).

The server serves the converted SmolLM2 directory on 127.0.0.1 (loopback only); nothing is mocked.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codegrep.agent.protocol import AgentConfig, build_messages

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
STARTUP_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(base_url, model dir) of a live ``transformers serve`` process, stopped after the module."""
    import httpx
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        pytest.skip("transformers serve needs fastapi/uvicorn/openai (pip install 'transformers[serving]')")
    from codegrep.agent.models import resolve_model

    model_dir = resolve_model("smollm2")
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    cli = Path(sys.executable).with_name("transformers")
    cmd = [str(cli), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.skip(f"transformers serve exited with {proc.returncode}: {log.read_text()[-500:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.skip(f"transformers serve did not answer within {STARTUP_S}s: {log.read_text()[-500:]}")
        yield base_url, model_dir
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_endpoint_policy_generates_through_a_live_server(server):
    from codegrep.agent.policies import make_policy

    base_url, model_dir = server
    policy = make_policy({"policy": "openai", "endpoint": base_url, "model": "smollm2", "max_new_tokens": 8})
    assert policy.model == str(model_dir)  # a local-only name is replaced by what the server lists
    histories = [build_messages("bug in foo.py"), build_messages("the CLI ignores --verbose")]
    outputs = policy.generate(histories)
    assert len(outputs) == 2 and all(isinstance(o, str) and o for o in outputs)
    assert all(u["prompt_tokens"] > 50 and 0 < u["completion_tokens"] <= 8 for u in policy.last_usage)
    assert policy.describe()["base_url"] == base_url


def test_endpoint_policy_drives_an_episode(server, tmp_path):
    from codegrep.agent.loop import load_episode, run_episode
    from codegrep.agent.policies import OpenAIPolicy
    from codegrep.env.tools import RepoToolEnvironment

    base_url, _ = server
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    policy = OpenAIPolicy(base_url, max_new_tokens=8)
    with RepoToolEnvironment(tmp_path) as env:
        ep = run_episode("x is wrong", env, policy, AgentConfig(max_turns=2), save_to=tmp_path / "ep.json")
    record = load_episode(tmp_path / "ep.json")
    assert record["policy"]["kind"] == "openai" and record["error"] is None
    assert 1 <= ep.rounds <= 2 and ep.turns[0].prompt_tokens > 0


def test_endpoint_errors_name_the_url():
    from codegrep.agent.policies import OpenAIPolicy

    with pytest.raises(RuntimeError, match=r"127\.0\.0\.1:\d+/v1/models"):
        OpenAIPolicy(f"http://127.0.0.1:{free_port()}", timeout_s=2)

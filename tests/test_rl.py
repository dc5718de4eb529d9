"""Fast tests of the RL maths and plumbing (no training): rewards, efficiency layers, KL, config, rollout tokens."""
from __future__ import annotations

import json

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
    from codegrep.rl.training_run import parse_train_args

    cg, grpo = parse_train_args("ci", {"efficiency_layer": "reward", "seed": 3})
    assert cg.efficiency_layer == "reward" and grpo.seed == 3 and grpo.use_cpu
    assert cg.run_name(grpo.seed) == "ci-reward-lam0.1-s3"
    with pytest.raises(ValueError, match="efficiency_layer"):
        parse_train_args("ci", {"efficiency_layer": "sideways"})
    assert parse_train_args("ci", {"demo_choice": "oracle-shown"})[0].demo_choice == "oracle-shown"
    with pytest.raises(ValueError, match="demo_choice"):
        parse_train_args("ci", {"demo_choice": "gold"})


def test_paper_config_keys_are_real_fields():
    import dataclasses

    import yaml
    from trl import GRPOConfig

    from codegrep.config import project_root
    from codegrep.rl.trainer import CodeGrepArgs

    known = {f.name for f in dataclasses.fields(CodeGrepArgs)} | {f.name for f in dataclasses.fields(GRPOConfig)}
    for name in ("ci", "smoke", "paper", "study", "study_gpu"):
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


def test_demonstration_length_is_counted_in_tokens():
    """The warm start drops demonstrations longer than max_length (a cut one would lose its submit call):
    the count must be tokens, not the keys of the mapping transformers 5 returns."""
    from transformers import AutoTokenizer

    from codegrep.agent.models import resolve_model
    from codegrep.rl.sft import demo_token_ids

    try:
        path = resolve_model("smollm2")
    except FileNotFoundError as exc:
        pytest.skip(f"SmolLM2 not available: {exc}")
    tok = AutoTokenizer.from_pretrained(path)
    short = [{"role": "user", "content": "find x"}, {"role": "assistant", "content": "ok"}]
    long = [{"role": "user", "content": "word " * 3000}, {"role": "assistant", "content": "ok"}]
    assert 5 < len(demo_token_ids(tok, short)) < 50
    assert len(demo_token_ids(tok, long)) > 2048


# --- efficiency-layer ablation (issue 15): exact advantage split, scale invariance, gating, bound, probe KL --------
def _random_batch(rng, groups=6, g=4, tied_every=2):
    f = rng.choice([0.0, 0.5, 1.0], size=(groups, g))
    f[::tied_every] = f[::tied_every, :1]  # every other group tied
    fmt = np.ones_like(f)
    cost = rng.uniform(0, 1, size=(groups, g))
    return f.ravel(), fmt.ravel(), cost.ravel()


@pytest.mark.parametrize("layer", adv.LAYERS)
def test_advantage_parts_sum_to_the_layer(layer):
    f, fmt, cost = _random_batch(np.random.default_rng(0))
    corr, eff = adv.advantage_parts(f, fmt, cost, 4, layer, 0.3, format_weight=0.2)
    np.testing.assert_allclose(corr + eff, adv.combined_advantages(f, fmt, cost, 4, layer, 0.3, format_weight=0.2))
    if layer == "reward":  # the literal definition, independently
        np.testing.assert_allclose(corr + eff, _trl_group_advantages(f + 0.2 * fmt - 0.3 * cost, 4))
    if layer == "none":
        assert not eff.any()


def test_scale_invariance_only_when_every_group_ties():
    rng = np.random.default_rng(1)
    f = np.repeat(rng.choice([0.0, 1.0], size=5), 4)  # 5 groups of 4, each tied
    fmt, cost, lam = np.ones_like(f), rng.uniform(0, 1, size=20), 0.1
    reward = adv.combined_advantages(f, fmt, cost, 4, "reward", lam, format_weight=0.2)
    advantage = adv.combined_advantages(f, fmt, cost, 4, "advantage", lam, format_weight=0.2)
    np.testing.assert_allclose(reward * lam, advantage, rtol=1e-2)  # proportional up to eps = 1e-4: same Adam step
    f2, fmt2, cost2 = _random_batch(rng)  # mixed batch: not proportional
    r2 = adv.combined_advantages(f2, fmt2, cost2, 4, "reward", lam, format_weight=0.2)
    a2 = adv.combined_advantages(f2, fmt2, cost2, 4, "advantage", lam, format_weight=0.2)
    assert r2 @ a2 / (np.linalg.norm(r2) * np.linalg.norm(a2)) < 0.999
    assert adv.tied_groups(f2 + 0.2 * fmt2, 4)[::2].all()


@pytest.mark.parametrize("g", [2, 4, 8])
def test_efficiency_term_bound_is_lambda_g_minus_1_over_sqrt_g(g):
    rng = np.random.default_rng(g)
    lam = 0.2
    bound = lam * adv.max_abs_normalized(g)
    assert bound == pytest.approx(lam * (g - 1) / np.sqrt(g))
    for _ in range(200):
        assert np.abs(adv.efficiency_advantage(rng.uniform(0, 1, g), g, lam)).max() <= bound + 1e-12
    outlier = adv.efficiency_advantage([1.0] + [0.0] * (g - 1), g, lam)
    assert np.abs(outlier).max() == pytest.approx(bound, rel=1e-3)  # attained (up to eps)
    if g > 2:
        assert bound < lam * np.sqrt(g - 1)  # the bound the module used to state was loose


def test_gated_layer_never_rewards_failing_cheaply():
    f = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.5, 0.0])
    fmt = np.ones(8)
    cost = np.array([0.1, 0.9, 0.5, 0.2, 0.2, 0.8, 0.1, 0.1])
    corr, eff = adv.advantage_parts(f, fmt, cost, 4, "gated", 0.1, format_weight=0.2)
    assert not eff[:4].any()  # all-failed group: the ungated layer would pay the cheapest failure
    assert adv.efficiency_advantage(cost, 4, 0.1)[:4].any()
    assert eff[4] > 0 > eff[5] and eff[6] == eff[7] == 0.0  # only among the top-reward rollouts
    np.testing.assert_allclose(corr, adv.advantage_parts(f, fmt, cost, 4, "advantage", 0.1, format_weight=0.2)[0])


def test_exact_probe_kl_matches_torch_and_is_zero_for_the_same_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    from codegrep.rl.kl import full_vocab_kl, probe_kl

    torch.manual_seed(0)
    p, q = torch.randn(5, 11), torch.randn(5, 11)
    expected = torch.nn.functional.kl_div(torch.log_softmax(q, -1), torch.log_softmax(p, -1), log_target=True,
                                          reduction="none").sum(-1)
    torch.testing.assert_close(full_vocab_kl(p, q), expected)
    cfg = GPT2Config(vocab_size=32, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    ref = GPT2LMHeadModel(cfg).eval()
    pol = GPT2LMHeadModel(cfg).eval()
    pol.load_state_dict(ref.state_dict())
    probes = [{"prompt_ids": [1, 2, 3], "completion_ids": [4, 5, 6, 7], "env_mask": [1, 1, 0, 1]}]
    assert probe_kl(pol, ref, probes) == pytest.approx(0.0, abs=1e-7)
    with torch.no_grad():
        pol.lm_head.weight.add_(0.5 * torch.randn_like(pol.lm_head.weight))
    cache: list = []
    head_rows = []  # the LM head runs on the probed positions only, not on every position of the sequence
    hook = pol.lm_head.register_forward_hook(lambda m, a, out: head_rows.append(a[0].shape[1]))
    kl = probe_kl(pol, ref, probes, ref_cache=cache)
    hook.remove()
    assert head_rows == [3]
    with torch.no_grad():  # by hand: positions 2, 3, 5 predict the model tokens 4, 5, 7
        ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
        manual = full_vocab_kl(pol(ids).logits[0, [2, 3, 5]], ref(ids).logits[0, [2, 3, 5]]).mean()
    assert kl == pytest.approx(float(manual), rel=1e-5) and kl > 0
    assert len(cache) == 1 and probe_kl(pol, ref, probes, ref_cache=cache) == pytest.approx(kl, rel=1e-6)


def test_probe_set_bad_row_names_file_and_line(tmp_path):
    from codegrep.rl.kl import read_probe_set

    path = tmp_path / "probe.jsonl"
    path.write_text('{"prompt_ids": [1], "completion_ids": [2, 3], "env_mask": [1]}\n')
    with pytest.raises(ValueError, match="probe.jsonl:1"):
        read_probe_set(path)


def test_paired_endpoint_rule():
    from codegrep.rl.paired import endpoint, sign_test_p

    less = endpoint([0.01, 0.012, 0.011, 0.009], [0.03, 0.035, 0.033, 0.03])
    assert less["n_paired_seeds"] == 4 and less["kl_log_ratio_hi"] < 0 and "LESS" in less["verdict"]
    assert less["sign_test_p"] == pytest.approx(0.125)
    same = endpoint([1.0, 1.01, 0.99, 1.0, 1.02, 0.98], [1.0] * 6)
    assert same["verdict"].startswith("no difference")
    wide = endpoint([0.5, 2.0], [1.0, 1.0])
    assert wide["verdict"].startswith("inconclusive")
    zero = endpoint([0.0, 0.0], [0.0, 0.1])  # no drift: the ratio is undefined, never "no difference"
    assert zero["n_paired_seeds"] == 0 and zero["verdict"].startswith("undefined")
    assert sign_test_p([1, 1, 1, 1, 1, 1, 1, -1]) == pytest.approx(2 * 9 / 256)


def test_ablation_arm_with_main_run_settings_is_recognised_as_the_main_run(tmp_path):
    """On ci the advantage arm of seed 0 has the main run's settings: the content key must say so (reuse),
    while another seed or layer must not."""
    from codegrep.rl import ablation as ab
    from codegrep.rl.training_run import parse_train_args, run_settings

    probe = tmp_path / "p.jsonl"  # checked at load (tests/test_bad_input.py)
    probe.write_text(json.dumps({"prompt_ids": [1], "completion_ids": [2], "env_mask": [1]}) + "\n")
    main_cg, main_grpo = parse_train_args("ci")
    over = {**ab.design_overrides(main_cg, main_grpo), "name": "x", "out": str(tmp_path / "x"),
            "kl_probe_set": str(probe), "log_update_norm": True, "record_groups": True, "save_final_model": False,
            "save_strategy": "no", "train_task_ids": ["a", "b"], "warm_start_dir": str(tmp_path / "w")}
    same = parse_train_args("ci", {**over, "efficiency_layer": main_cg.efficiency_layer, "seed": main_grpo.seed})
    assert run_settings(*same) == run_settings(main_cg, main_grpo)
    for change in ({"seed": main_grpo.seed + 1}, {"efficiency_layer": "reward"}):
        other = parse_train_args("ci", {**over, "efficiency_layer": main_cg.efficiency_layer,
                                        "seed": main_grpo.seed, **change})
        assert run_settings(*other) != run_settings(main_cg, main_grpo)
    assert ab.arms(main_cg)[0][0] in ("none", "reward")
    assert sum(layer == "none" for layer, _ in ab.arms(parse_train_args("ci", {"lambda_grid": [0.1, 0.2],
               "ablation_layers": ["none", "reward"]})[0])) == 1  # none once per seed, whatever the lambdas


def test_ablation_designs_are_paired_and_sized_as_documented():
    import yaml

    from codegrep.config import project_root
    from codegrep.rl.advantages import LAYERS

    for name, min_seeds in (("ci", 2), ("smoke", 2), ("study", 8), ("study_gpu", 8)):
        data = yaml.safe_load((project_root() / "configs" / "train" / f"{name}.yaml").read_text())
        assert len(data["ablation_seeds"]) >= min_seeds, name
        assert {"reward", "advantage"} <= set(data["ablation_layers"]) <= set(LAYERS), name
        if name != "ci":  # ci mirrors the main run (2 turns, 1 prompt) so that run is reused, not retrained
            assert data["ablation_prompts_per_step"] >= 2, name  # batches can mix tied and varied groups
            assert data["ablation_max_turns"] >= (2 if name == "smoke" else 3), name  # rounds can vary


def test_ablation_arms_start_from_the_main_runs_warm_start():
    """When the ablation's episodes are shorter than the main run's (smoke: 2 turns vs 3), the arms' and the
    screen's demonstrations are still written for the main run's episodes: one warm start per profile."""
    from codegrep.config import load_profile
    from codegrep.rl import ablation as ab
    from codegrep.rl.training_run import demonstration_agent, episode_config

    cfg = load_profile("smoke")
    main_cg, main_grpo = ab.ablation_arguments(cfg)
    main_agent, _ = episode_config(cfg, main_cg)
    over = ab.design_overrides(main_cg, main_grpo, ab._main_turns(cfg, main_cg))
    arm_cg, _ = ab.ablation_arguments(cfg, None, over)
    arm_agent, _ = episode_config(cfg, arm_cg)
    assert arm_agent.max_turns == main_cg.ablation_max_turns != main_agent.max_turns
    assert demonstration_agent(arm_agent, arm_cg) == main_agent == demonstration_agent(main_agent, main_cg)
    same_turns = ab.design_overrides(main_cg, main_grpo, main_cg.ablation_max_turns)
    assert "demo_max_turns" not in same_turns  # nothing to keep apart: the arm's own episodes are the main run's


def test_sft_seed_reaches_the_warm_start_and_keys_its_cache(monkeypatch, tmp_path):
    """train.sft_seed is the seed the warm start trains with (its batch order) and part of the cached warm start's
    key; seed 0 keys it as before the field existed (the committed warm starts stay valid) and GRPO's seed is not
    part of it (every arm and seed of a study shares one warm start)."""
    from codegrep.agent.models import model_identity, resolve_model
    from codegrep.config import load_profile
    from codegrep.rl import sft
    from codegrep.rl import training_run as tr

    msgs = [{"role": "user", "content": "issue"}, {"role": "assistant", "content": "<tool_call>A</tool_call>"}]
    monkeypatch.setattr(tr, "demonstrations", lambda *a, **k: [{"messages": msgs}])
    calls = []
    monkeypatch.setattr(sft, "warm_start", lambda base, demos, out, **kw: calls.append((out, kw["seed"])) or out)
    cfg = load_profile("ci")
    outs = {}
    for sft_seed, seed in ((0, 0), (0, 3), (1, 0)):
        cg, grpo = tr.train_arguments(cfg, {"sft_seed": sft_seed, "seed": seed, "out": str(tmp_path)})
        tr.initial_policy(cg, grpo, cfg, [], None, None, None, {}, None)
        outs[sft_seed, seed] = calls[-1][0]
        assert calls[-1][1] == sft_seed
    assert outs[0, 0] == outs[0, 3] != outs[1, 0]
    cg, grpo = tr.train_arguments(cfg, {"out": str(tmp_path)})
    base = tr.warm_start_settings(cg, "b", True)
    assert "sft_seed" not in base and {**base, "sft_seed": 1} == tr.warm_start_settings(
        tr.train_arguments(cfg, {"sft_seed": 1})[0], "b", True)
    identity = model_identity(resolve_model(cg.model))
    assert outs[0, 0].name == sft.demos_key([msgs], tr.warm_start_settings(cg, identity, tr.sft_bf16(cg, grpo)))


def test_plain_progress_works_without_ipython(monkeypatch):
    """transformers' notebook progress module imports IPython, absent from plain installs (a GPU machine's image):
    the warm start must still swap the printers for one line per step instead of failing on the import."""
    import sys

    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from codegrep.rl.progress import StepProgress, plain_progress

    monkeypatch.setitem(sys.modules, "transformers.utils.notebook", None)  # `import` of it raises ImportError

    class Trainer:
        def __init__(self):
            self.removed, self.added = [], []

        def remove_callback(self, cb):
            self.removed.append(cb)

        def add_callback(self, cb):
            self.added.append(cb)

    trainer = Trainer()
    plain_progress(trainer, "SFT", {"loss": "loss {:.3f}"})
    assert trainer.removed == [PrinterCallback, ProgressCallback]
    assert len(trainer.added) == 1 and isinstance(trainer.added[0], StepProgress)
